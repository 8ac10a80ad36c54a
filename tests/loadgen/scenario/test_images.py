"""loadgen.scenario.images and workload.images: seeded images, dealt in turn, chat only."""
import base64
import io

import pytest
from PIL import Image

from loadgen.scenario.images import ImagePool, make_image
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import Images
from loadgen.scenario.strict import ScenarioError
from loadgen.scenario.workload import build_workload


def decode(url):
    head, _, b64 = url.partition(";base64,")
    return head[5:], Image.open(io.BytesIO(base64.b64decode(b64)))


def test_the_same_seed_makes_the_same_bytes_and_others_differ():
    a = make_image(0, 1, 64, 48, "png")
    assert a == make_image(0, 1, 64, 48, "png")
    assert a != make_image(0, 2, 64, 48, "png") and a != make_image(1, 1, 64, 48, "png")


@pytest.mark.parametrize("fmt,mime", [("png", "image/png"), ("jpeg", "image/jpeg")])
def test_pool_images_have_the_asked_shape_and_are_dealt_in_turn(fmt, mime):
    pool = ImagePool(Images(count=2, width=40, height=24, format=fmt, pool=3), seed=7)
    assert len(set(pool.urls)) == 3
    got, im = decode(pool.urls[0])
    assert got == mime and im.size == (40, 24) and im.mode == "RGB"
    assert pool.for_request(0) == (pool.urls[0], pool.urls[1])
    assert pool.for_request(1) == (pool.urls[2], pool.urls[0])      # (k·count + j) mod pool
    d = pool.describe()
    assert d["pool"] == 3 and d["bytes_max"] >= d["bytes_mean"] > 0


def test_the_workload_carries_images_per_request():
    w = scenario_from_dict({"target": {"url": "http://127.0.0.1:1"}, "api": {"endpoint": "chat"},
                            "workload": {"images": {"count": 1, "width": 16, "height": 16,
                                                    "pool": 2}},
                            "load": {"mode": "server", "rate": 1, "num_requests": 3}}).workload
    plan = build_workload(w)
    specs = plan.take(3)
    assert [s.images for s in specs] == [(plan.images.urls[0],), (plan.images.urls[1],),
                                         (plan.images.urls[0],)]
    assert plan.describe()["images"]["width"] == 16


@pytest.mark.parametrize("over,msg", [
    ({"api": {"endpoint": "completions"}}, "workload.images: images go with api.endpoint chat"),
    ({"workload": {"images": {"width": 4}}}, "workload.images.width"),
    ({"workload": {"images": {"count": 17}}}, "workload.images.count"),
])
def test_bad_image_settings_are_one_line(over, msg):
    t = {"target": {"url": "http://127.0.0.1:1"}, "api": {"endpoint": "chat"},
         "workload": {"images": {}}, "load": {"mode": "server", "rate": 1, "num_requests": 2}}
    t.update(over)
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(t)
    assert msg in str(e.value) and "\n" not in str(e.value)
