"""`--models a,b` (servers/calib): /v1/models lists those ids, each answer echoes the model the
request named, a name not listed gets vLLM's 404; without the flag, calib-model and any name."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from servers.calib import CalibrationServer
from servers.calib.serve import main


def post(url: str, body: dict) -> tuple[int, str]:
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_models_listed_echoed_and_unknown_404():
    with CalibrationServer(models=["a", "b"]) as s:
        with urllib.request.urlopen(s.url + "/v1/models", timeout=30) as r:
            assert [m["id"] for m in json.loads(r.read())["data"]] == ["a", "b"]
        st, text = post(s.url, {"model": "b", "prompt": "x", "max_tokens": 2, "stream": True})
        events = [json.loads(ln[6:]) for ln in text.splitlines() if ln.startswith("data: {")]
        assert st == 200 and events and {e["model"] for e in events} == {"b"}
        st, text = post(s.url, {"model": "a", "prompt": "x", "max_tokens": 2})
        assert st == 200 and json.loads(text)["model"] == "a"
        st, text = post(s.url, {"model": "zz", "prompt": "x", "max_tokens": 2, "stream": True})
        assert st == 404 and "The model `zz` does not exist." in text


def test_without_the_flag_one_model_and_any_name(calib_server):
    with urllib.request.urlopen(calib_server.url + "/v1/models", timeout=30) as r:
        assert [m["id"] for m in json.loads(r.read())["data"]] == ["calib-model"]
    st, text = post(calib_server.url, {"model": "whatever", "prompt": "x", "max_tokens": 2})
    assert st == 200 and json.loads(text)["model"] == "whatever"


def test_an_empty_model_id_is_one_line_exit_2(capsys):
    assert main(["--models", "a,,b"], prog="loadgen serve calib") == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "loadgen serve calib: error: --models: an empty model id in 'a,,b'"]
