"""analysis.metrics.embeddings: pure functions of records; None (never 0) where data is missing."""
from analysis.metrics.embeddings import (embeddings_block, input_throughput,
                                         input_token_throughput)

MS = 1_000_000


def rec(i, sent, end, inputs=2, prompt=10, status="ok", phase="measured", source="usage"):
    return {"id": i, "phase": phase, "status": status, "sent_at_ns": sent, "end_at_ns": end,
            "inputs": inputs, "prompt_tokens": prompt, "prompt_tokens_source": source,
            "first_token_at_ns": None, "chunks": []}


def test_figures_over_the_window():
    recs = [rec(0, 0, 100 * MS), rec(1, 0, 200 * MS, inputs=4, prompt=30),
            rec(2, 500 * MS, 1000 * MS, status="error", inputs=8, prompt=None),
            rec(3, 0, 50 * MS, phase="warmup", inputs=100)]
    win = (0, 1000 * MS)                                   # 1 s: the failed one ends it
    assert input_throughput(recs, win) == 6.0              # completed measured only
    assert input_token_throughput(recs, win) == 40.0
    b = embeddings_block(recs, {"endpoint": "embeddings"})
    assert b["request_throughput"] == 2.0 and b["input_throughput"] == 6.0
    assert b["inputs_per_request"] == 3.0 and b["inputs_total"] == 6
    assert b["latency_ms"]["p50"] == 150.0 and b["latency_ms"]["count"] == 2
    assert b["prompt_tokens_source"] == {"usage": 2}


def test_missing_data_is_none_never_zero():
    assert input_throughput([], None) is None
    assert input_token_throughput([rec(0, 0, MS, prompt=None)], (0, MS)) is None
    b = embeddings_block([rec(0, 0, MS, status="error")], {"endpoint": "embeddings"})
    assert b["latency_ms"]["p50"] is None and b["latency_ms"]["count"] == 0
    assert b["inputs_per_request"] is None and b["input_throughput"] is None
    # a completions run has no embeddings block
    assert embeddings_block([{**rec(0, 0, MS), "inputs": None}], {"endpoint": "completions"}) is None
    assert embeddings_block([], {}) is None
