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


def test_over_runs_takes_min_median_max_and_judges_the_min_against_the_goal():
    from bench.engine_vs_llama_cpp import over_runs
    speeds = [{"1": 0.83, "8": 1.2, "32": 1.6}, {"1": 1.31, "8": 1.1, "32": 1.4}, {"1": 0.77, "8": 1.05, "32": 1.7}]
    s = over_runs(speeds, [1, 8, 32])
    assert (s["1"]["min"], s["1"]["median"], s["1"]["max"]) == (0.77, 0.83, 1.31)
    assert abs(s["1"]["spread"] - 0.54) < 1e-12 and (s["1"]["runs"], s["1"]["of"]) == (3, 3)
    assert (s["1"]["met"], s["8"]["met"], s["32"]["met"]) == (False, True, False)   # 32 needs 1.5 at the min
    assert over_runs(speeds[:2], [1])["1"]["median"] == (0.83 + 1.31) / 2


def test_over_runs_keeps_missing_runs_out_and_unknown_not_met():
    from bench.engine_vs_llama_cpp import over_runs, runs_table
    s = over_runs([{"8": None}, {"8": 1.2}], [8, 4])
    assert (s["8"]["min"], s["8"]["runs"], s["8"]["of"], s["8"]["met"]) == (1.2, 1, 2, None)
    assert over_runs([{"8": None}, {"8": 0.9}], [8])["8"]["met"] is False     # a miss is a miss
    assert s["4"] == {"min": None, "median": None, "max": None, "spread": None, "runs": 0, "of": 2,
                      "goal": None, "met": None}
    row = runs_table(s, [4]).splitlines()[-1]
    assert row == "| 4 | missing | missing | missing | missing | 0 of 2 | missing | missing |"
