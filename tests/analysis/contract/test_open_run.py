"""loadgen.open_run on a hand-built run directory: typed files, one row per request / per chunk,
times in ms from t0, the summary computed by the one function when summary.json is absent."""
import json

import pytest

import loadgen
from analysis.contract import SCHEMA_VERSION, ContractError
from analysis.metrics.summary import summarize_run, write_summary
from tests.analysis.synth import MS, jax_sut, rec, server_meta, steady, write_run


def test_tables_and_typed_files(tmp_path):
    recs = steady(12, warmup=2)                  # every record: 1 role + 8 tokens + 1 usage chunk
    d = write_run(tmp_path / "r", recs, server_meta(t0_ns=100 * MS, min_queries=0), jax_sut())
    run = loadgen.open_run(d)
    assert run.t0_ns == 100 * MS and run.t0_source == "meta.json t0_ns"
    assert run.meta.rate == 20.0 and run.sut.model == "tiny"
    df = run.records()
    assert list(df.index) == list(range(12)) and len(run.records("measured")) == 10
    first = df.loc[0]
    assert first["sent_ms"] == pytest.approx(1 - 100) and first["ttft_ms"] == pytest.approx(20)
    assert first["first_token_ms"] - first["sent_ms"] == pytest.approx(first["ttft_ms"])
    assert (df["tpot_ms"] - (df["e2el_ms"] - df["ttft_ms"]) / 7).abs().max() < 1e-9
    assert (df["n_chunks"] == 10).all()
    ch = run.chunks()
    assert len(ch) == 120 and list(ch.columns) == ["id", "phase", "index", "t_ms", "n_tokens",
                                                   "since_sent_ms", "gap_ms"]
    one = ch[ch["id"] == 3]
    assert one["index"].tolist() == list(range(10)) and one["gap_ms"].isna().tolist()[0]
    assert one["n_tokens"].sum() == 8 and one["since_sent_ms"].iloc[1] == pytest.approx(20)
    # no summary.json: computed by summarize_run, the function the run uses
    assert run.summary.model_dump(exclude_unset=True) == json.loads(json.dumps(summarize_run(d)))
    write_summary(d)
    assert loadgen.open_run(d).summary.schema_version == SCHEMA_VERSION


def test_without_t0_the_first_send_is_the_origin(tmp_path):
    meta = server_meta()
    meta.pop("t0_ns")
    d = write_run(tmp_path / "r", [rec(0, sched=5, sent=7, chunks=[[9, 1]])], meta)
    run = loadgen.open_run(d)
    assert run.t0_ns == 7 * MS and run.t0_source.startswith("first measured send")
    assert run.records().loc[0, "sent_ms"] == 0.0 and run.records().loc[0, "scheduled_ms"] == -2


def test_a_file_that_does_not_fit_names_the_field(tmp_path):
    d = write_run(tmp_path / "r", [rec(0)], {"mode": "server", "t0_ns": "late"})
    with pytest.raises(ContractError, match=r"^meta.json: t0_ns: "):
        loadgen.open_run(d)
    with pytest.raises(FileNotFoundError):
        loadgen.open_run(tmp_path / "nothing")
