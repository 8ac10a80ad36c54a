"""workload.images end to end: `loadgen run` (chat) against the calibration server on 127.0.0.1,
which decodes every image part it gets (GET /calib/log ``images``)."""
import json

from analysis.contract import validate_run_dir
from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict


def test_images_reach_the_server_with_their_shape(calib_server, tmp_path):
    tree = {"name": "img", "target": {"url": calib_server.url},
            "api": {"endpoint": "chat", "extra_body": {"calib": {"ttft_ms": 1, "itl_ms": 1}}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 4},
                         "shared_prefix_tokens": 0, "seed": 3,
                         "images": {"count": 2, "width": 64, "height": 48, "pool": 3}},
            "load": {"mode": "server", "rate": 40, "num_requests": 6, "warmup_requests": 1},
            "output": {"dir": str(tmp_path), "run_name": "run", "report": "text"}}
    res = run_scenario(scenario_from_dict(tree))
    recs = read_records(res.run_dir / "records.jsonl")
    assert sorted(r["id"] for r in recs) == list(range(7))
    assert all(r["status"] == "ok" and r["input_images"] == 2 for r in recs)
    log = calib_server.log()
    mine = [e for e in log if e.get("images") and e["arrival_ns"] >= min(r["sent_at_ns"] for r in recs)]
    assert len(mine) >= 7
    for e in mine[-7:]:
        assert [(i["mime"], i["width"], i["height"]) for i in e["images"]] == \
            [("image/png", 64, 48)] * 2
    s = json.loads((res.run_dir / "summary.json").read_text())
    assert s["images"]["requests"] == 6 and s["images"]["images"] == 12
    assert (s["images"]["width"], s["images"]["height"], s["images"]["pool"]) == (64, 48, 3)
    meta = json.loads((res.run_dir / "meta.json").read_text())
    assert meta["workload"]["images"]["format"] == "png"
    assert "Images (workload.images)" in (res.run_dir / "report.md").read_text()
    assert validate_run_dir(res.run_dir) == []
