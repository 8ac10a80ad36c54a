"""`loadgen run --engine locust` refuses an embeddings scenario in one line (exit 2) before
anything starts: the Locust users speak completions and chat only."""
import yaml

from loadgen.cli import main as cli_main


def test_locust_engine_refuses_embeddings(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({
        "target": {"url": "http://127.0.0.1:9"}, "api": {"endpoint": "embeddings"},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 1},
        "output": {"dir": str(tmp_path)}}))
    assert cli_main(["run", str(p), "--engine", "locust"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "api.endpoint: embeddings runs with the native engine only" in err[0]
    assert not any(tmp_path.glob("*/records.jsonl"))
