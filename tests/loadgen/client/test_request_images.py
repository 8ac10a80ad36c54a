"""Image parts in the chat body (loadgen.client.request): spliced bytes equal the plain encoding."""
import json

from loadgen.client.request import request_body

URLS = ("data:image/png;base64,AAAA", "data:image/jpeg;base64,/9j/" + "B" * 1000)


def test_the_user_message_is_text_then_images():
    body = json.loads(request_body({"model": "m", "stream": True}, True, "hello \"you\"", 8,
                                   images=URLS))
    assert body["max_tokens"] == 8 and body["model"] == "m"
    (msg,) = body["messages"]
    assert msg["role"] == "user"
    assert msg["content"] == [{"type": "text", "text": "hello \"you\""},
                              {"type": "image_url", "image_url": {"url": URLS[0]}},
                              {"type": "image_url", "image_url": {"url": URLS[1]}}]


def test_without_images_the_body_is_unchanged():
    plain = json.loads(request_body({"model": "m"}, True, "hi", 4))
    assert plain["messages"] == [{"role": "user", "content": "hi"}]
    assert json.loads(request_body({"model": "m"}, True, "hi", 4, images=())) == plain
