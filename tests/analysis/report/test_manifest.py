"""The reproducibility manifest, on hand-built run directories."""
import hashlib
import json

from analysis.report import manifest
from tests.analysis.synth import jax_sut, scenario_yaml, server_meta, steady, write_run


def _run(tmp_path, name, yaml_text, **meta_over):
    d = write_run(tmp_path / name, steady(6), server_meta(**meta_over), jax_sut())
    (d / "scenario.yaml").write_text(yaml_text)
    return d


def test_scenario_hash_ignores_the_output_section_only(tmp_path):
    a = manifest.manifest(_run(tmp_path, "a", scenario_yaml(2, 12, "a")))
    b = manifest.manifest(_run(tmp_path, "b", scenario_yaml(2, 12, "b")))
    c = manifest.manifest(_run(tmp_path, "c", scenario_yaml(2, 12, "c").replace("seed: 0",
                                                                                "seed: 5")))
    assert a["scenario"]["sha256"] == b["scenario"]["sha256"] != c["scenario"]["sha256"]
    assert a["scenario"]["file_sha256"] != b["scenario"]["file_sha256"]
    assert a["scenario"]["file_sha256"] == hashlib.sha256(
        (tmp_path / "a" / "scenario.yaml").read_bytes()).hexdigest()
    assert c["seeds"]["workload"] == 5 and c["seeds"]["schedule"] == 6   # the runner's default
    with_load_seed = scenario_yaml(2, 12, "d").replace("num_requests: 12}",
                                                       "num_requests: 12, seed: 9}")
    assert manifest.manifest(_run(tmp_path, "d", with_load_seed))["seeds"]["schedule"] == 9
    recorded = manifest.manifest(_run(tmp_path, "e", with_load_seed, schedule_seed=42))
    assert recorded["seeds"]["schedule"] == 42
    assert recorded["seeds"]["schedule_rule"] == "recorded (meta.json)"


def test_dataset_and_tokenizer_files_are_hashed_or_say_why(tmp_path):
    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "hi", "max_tokens": 4}\n')
    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    (tok_dir / "tokenizer.json").write_text('{"model": {}}')
    wl = {"source": "jsonl", "path": str(data), "tokenizer": str(tok_dir), "seed": 3,
          "token_count": "exact", "file_prompts": 1}
    m = manifest.manifest(_run(tmp_path, "r", "name: x\n", workload=wl))
    assert m["dataset"]["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert m["tokenizer"]["sha256"] == hashlib.sha256(
        (tok_dir / "tokenizer.json").read_bytes()).hexdigest()
    data.unlink()
    m = manifest.manifest(tmp_path / "r")
    assert m["dataset"]["sha256"] is None and "not reachable" in m["dataset"]["status"]
    rows = {r[0]: r for r in manifest.manifest_rows(m)}
    assert list(rows) == ["tool version", "scenario hash", "dataset", "tokenizer", "seeds",
                          "server flags", "hardware"]
    assert "not reachable" in rows["dataset"][1]


def test_server_flags_and_hardware(tmp_path):
    sut = jax_sut()
    sut["managed_server"]["argv"] = ["python", "-m", "servers.jax", "--preset", "tiny",
                                     "--slots", "4"]
    sut["server_info"]["server"] = {"seed": 7, "slots": 4}
    sut["client_host"].update(hostname="box1", cpu_count=4)
    d = write_run(tmp_path / "r", steady(4), server_meta(), sut)
    m = manifest.manifest(d)
    assert m["seeds"]["server"] == 7
    rows = {r[0]: r for r in manifest.manifest_rows(m)}
    assert rows["server flags"][1].startswith("jax: python -m servers.jax --preset tiny "
                                              "--slots 4")
    assert rows["server flags"][2] == "recorded"
    assert "box1 (2 usable CPUs, of 4, 8.0 GiB)" in rows["hardware"][1]
    assert "server device cpu x1 (cpu)" in rows["hardware"][1]
    # no scenario.yaml, an external server: each item says what is missing
    ext = {k: v for k, v in sut.items() if k not in ("managed_server", "server_info")}
    (d / "sut.json").write_text(json.dumps(ext))
    rows = {r[0]: r for r in manifest.manifest_rows(manifest.manifest(d))}
    assert "no scenario.yaml" in rows["scenario hash"][1]
    assert "loadgen did not start this server" in rows["server flags"][1]
    assert "not recorded (no /info)" in rows["hardware"][1]
