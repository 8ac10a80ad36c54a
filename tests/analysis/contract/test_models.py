"""analysis/contract models: permissive to read, closed to write, one line per problem."""
import json

import pytest

from analysis.contract import (ERROR_KINDS, SCHEMA_VERSION, ContractError, RunMeta, RunRecord,
                               ServerLife, Summary, Sut)
from analysis.metrics import steady
from tests.analysis.synth import rec, server_meta, steady as steady_recs


def test_an_older_meta_reads_and_its_cpu_is_one_number():
    m = RunMeta.read({**server_meta(client_cpu={"fraction": 0.97}), "from_a_newer_writer": 1})
    assert m.schema_version is None                    # written before the contract
    assert m.client_cpu == 0.97 and m.mode == "server" and m.rate == 20.0
    assert m.as_dict()["from_a_newer_writer"] == 1     # kept when reading


def test_writing_names_every_top_level_key_and_sets_the_version():
    out = RunMeta.dump(server_meta(probe={"status": "ok", "warnings": [], "ready": {"s": 1}}))
    assert out["schema_version"] == SCHEMA_VERSION
    assert out["probe"]["ready"] == {"s": 1}           # the probe's block is open
    with pytest.raises(ContractError, match="not in the contract: concurrency"):
        RunMeta.dump(server_meta(concurrency=4))


def test_a_wrong_type_is_one_line_naming_the_field():
    with pytest.raises(ContractError) as e:
        RunMeta.read({"t0_ns": "soon"}, "meta.json")
    assert str(e.value).startswith("meta.json: t0_ns: ") and "\n" not in str(e.value)
    assert Summary.problems({"requests_completed": 1, "verdict": {"valid": "maybe"}}, "s")[0] \
        .startswith("s: verdict.valid: ")


def test_problems_of_a_written_file():
    assert Sut.problems({"target_url": "http://x"}) == ["Sut: schema_version: None, expected 1"]
    assert ServerLife.problems({"schema_version": 1, "status": "stopped", "extra": 1}) == \
        ["ServerLife: extra: not in the contract"]
    assert Sut.problems({"target_url": "http://x"}, written=False) == []


def test_the_optional_blocks_other_modules_add_validate():
    s = Summary.dump({"requests_completed": 3, "unsent_requests": 2,
                      "client": {"saturated": True, "reasons": [{"rule": "cpu", "value": 0.97,
                                                                 "limit": 0.9}]},
                      "roofline": {"mbu": 0.5, "tpot_p50_ms": 10.0, "decode_floor_ms": 5.0,
                                   "prefill_floor_ms": 20.0,
                                   "device": {"name": "cpu", "evidence": "measured",
                                              "mem_bandwidth": 2.6e10,
                                              "measured_at": "2026-12-03T10:00:00Z"}}})
    assert s["roofline"]["device"]["mem_bandwidth"] == 2.6e10 and s["unsent_requests"] == 2
    assert RunMeta.dump({"unsent_requests": 0})["unsent_requests"] == 0


def test_the_record_model_is_the_record_dataclass():
    from loadgen.record import ERROR_KINDS as WRITTEN_KINDS, Record
    assert Record is RunRecord                              # one definition, written and read
    assert set(Record.__struct_fields__) == set(json.loads(Record(0, "measured", 0).to_json()))
    assert set(WRITTEN_KINDS) <= set(ERROR_KINDS)          # every kind documented
    r = RunRecord.read(rec(0, chunks=[[5, 1], [7, 1]], error_kind="a_kind_from_the_future"))
    assert r.chunks == [(5_000_000, 1), (7_000_000, 1)] and r.error_kind == "a_kind_from_the_future"


def test_steady_reads_the_one_cap_field():
    recs = steady_recs(30, gap_ms=50)
    assert steady._cap(RunMeta.read({"in_flight_cap": 3})) == 3
    assert steady._cap(RunMeta.read({"in_flight_cap": None, "concurrency": 3})) is None
    assert steady.steady_window(recs, {"mode": "concurrency", "in_flight_cap": 1})["level"] == 1


def test_a_roofline_block_with_or_without_the_by_in_flight_keys_validates(tmp_path):
    import json
    from analysis.contract import validate_run_dir
    old = {"status": "calculated", "mbu": 0.2, "tpot_p50_ms": 100.0, "decode_floor_ms": 18.0,
           "device": {"name": "cpu", "evidence": "measured", "mem_bandwidth": 2.2e10}}
    new = {**old, "by_in_flight": [{"in_flight": 1, "batch": 1, "gaps": 118, "itl_p50_ms": 27.6,
                                    "context_len": 113.0, "floor_ms": 17.7, "mbu": 0.64,
                                    "broken": False, "reason": None, "step_bytes": 4e8}],
           "by_in_flight_dropped": 308,
           "batch1": {"mbu": 0.64, "itl_p50_ms": 27.6, "floor_ms": 17.7, "gaps": 118,
                      "context_len": 113.0, "reason": None}}
    for i, block in enumerate((old, new)):
        d = tmp_path / f"run{i}"
        d.mkdir()
        (d / "records.jsonl").write_text("")
        (d / "meta.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION}))
        (d / "summary.json").write_text(json.dumps(Summary.dump({"roofline": block})))
        assert validate_run_dir(d) == []
    assert Summary.read({"roofline": old}).roofline.batch1 is None
    assert Summary.read({"roofline": new}).roofline.batch1.gaps == 118
    assert Summary.problems({"roofline": {"batch1": {"gaps": "many"}}}, "s")[0] \
        .startswith("s: roofline.batch1.gaps: ")


def test_the_model_name_has_one_accessor():
    """meta.json's model, else sut.json's, else the managed server's preset: one typed reading
    (RunMeta.model_name) instead of each reader guessing between keys."""
    from tests.analysis.synth import jax_sut
    sut = Sut.read(jax_sut())
    assert RunMeta.read({"model": "m1"}).model_name(sut) == "m1"
    assert RunMeta.read({}).model_name(sut) == "tiny"
    assert RunMeta.read({}).model_name(Sut.read({"server_info": {"preset": "p"}})) == "p"
    assert RunMeta.read({}).model_name(None) is None and sut.info["preset"] == "tiny"
