"""bench/timing_truth.py: which flags and CPUs each engine row runs `loadgen run` with."""
from bench.timing_truth import CLIENT_CPU, _engine_args


def test_engine_rows_flags_and_cpus():
    assert _engine_args("native") == ([], frozenset({CLIENT_CPU}))
    assert _engine_args("locust") == (["--engine", "locust"], frozenset({CLIENT_CPU}))
    assert _engine_args("locust1") == (["--engine", "locust", "--workers", "1"],
                                       frozenset({CLIENT_CPU}))
    assert _engine_args("procs2") == (["--procs", "2"], frozenset({0, 1}))
    assert _engine_args("procs3")[0] == ["--procs", "3"]
