"""The engine bench's pure parts: its scenario is a valid loadgen scenario, speed and table."""
from bench.engine_vs_llama_cpp import scenario, speed, table
from loadgen.scenario.loader import scenario_from_dict


def test_scenario_is_a_strict_loadgen_scenario(tmp_path):
    sc = scenario_from_dict(scenario("http://127.0.0.1:9", 8, tmp_path))
    assert (sc.load.mode, sc.load.concurrency, sc.load.num_requests, sc.load.warmup_requests) == \
        ("concurrency", 8, 24, 8)
    assert sc.api.ignore_eos and sc.api.stream and sc.target.server is None
    assert scenario_from_dict(scenario("http://127.0.0.1:9", 1, tmp_path)).load.num_requests == 4


def test_speed_is_tpot_ratio_below_32_and_throughput_ratio_at_32():
    ll, jx = {"tpot_p50_ms": 20.0, "output_tok_s": 300.0}, {"tpot_p50_ms": 25.0, "output_tok_s": 450.0}
    assert speed(ll, jx, 8) == 0.8
    assert speed(ll, jx, 32) == 1.5
    assert speed(ll, {}, 8) is None                       # missing stays missing


def test_table_writes_missing_not_zero():
    md = table({"llama.cpp": {"1": {"tpot_p50_ms": 16.9, "output_tok_s": 58.0}}, "jax": {}}, [1])
    row = md.splitlines()[-1]
    assert row.startswith("| 1 | 16.9 ms | missing | 58 | missing | missing |")
