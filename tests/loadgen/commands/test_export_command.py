"""``loadgen export RUN_DIR --jsonl`` (issue 42): records.arrow ─► records.jsonl, streamed a batch
at a time, byte for byte the lines the JSONL writer writes for the same records (secrets redacted
on the way in); an existing file kept unless --force; bad input one line, exit 2."""
import pytest

from analysis.contract.columnar import ColumnarWriter
from analysis.contract.columnar_io import export_jsonl
from analysis.contract.record import Record, ServerTiming
from loadgen import redact as redact_mod
from loadgen.cli import main as cli_main
from loadgen.record import RecordWriter

SECRET = "sk-live-0123456789abcdef"


def rec(i: int, tokens: int = 3, **kw) -> Record:
    t = 5_000_000_000 + 1_000_000 * i
    ch = [[t + 10, 0]] + [[t + 20 + k, 1] for k in range(tokens)]
    return Record(**{**dict(id=i, phase="warmup" if i < 2 else "measured", scheduled_at_ns=t,
                            sent_at_ns=t + 1, first_chunk_at_ns=ch[0][0],
                            first_token_at_ns=ch[1][0] if tokens else None, end_at_ns=ch[-1][0],
                            chunks=ch, status="ok", http_status=200, prompt_tokens=8,
                            output_tokens=tokens, finish_reason="length", worker="0"), **kw})


def records() -> list[Record]:
    out = [rec(i) for i in range(40)]
    out[3] = rec(3, status="error", error_kind="http", http_status=401, chunks=[],
                 error=f'{{"detail": "bad key Bearer {SECRET}"}}', output_tokens=None)
    out[5] = rec(5, server_timing=ServerTiming(queue_ms=1.25, prefill_ms=3.0),
                 attempt_log=[(429, 5, 6, "rate_limited"), (200, 7, None, None)],
                 retry_after_s=0.5)
    out[7] = rec(7, tokens=0, output_text="héllo ✓ \"quoted\"\n", session_id="s1", turn=2)
    out[9] = rec(9, status="cancelled", chunks=[], error="run interrupted", input_audio_s=1.5)
    return out


@pytest.fixture
def both(tmp_path):
    """The same records written by the JSONL writer and by the columnar one (small batches)."""
    redact_mod.register(f"Bearer {SECRET}")
    try:
        with RecordWriter(tmp_path / "want.jsonl") as w:
            for r in records():
                w.write(r)
        d = tmp_path / "run"
        d.mkdir()
        with ColumnarWriter(d / "records.arrow", clean=redact_mod.redact, batch=16,
                            flush_s=1e9) as c:
            c.write_many(records())
    finally:
        redact_mod.clear()
    return tmp_path / "want.jsonl", d


def test_the_export_is_the_jsonl_writers_bytes(both, tmp_path):
    want, d = both
    assert export_jsonl(d / "records.arrow", tmp_path / "got.jsonl") == 40
    got = (tmp_path / "got.jsonl").read_bytes()
    assert SECRET.encode() not in got and b"[REDACTED]" in got
    assert got.splitlines() == want.read_bytes().splitlines()
    assert got == want.read_bytes()


def test_the_command_writes_records_jsonl_and_keeps_an_existing_one(both, capsys):
    want, d = both
    assert cli_main(["export", str(d), "--jsonl"]) == 0
    assert (d / "records.jsonl").read_bytes() == want.read_bytes()
    assert "40 records" in capsys.readouterr().err
    (d / "records.jsonl").write_text("mine\n")
    assert cli_main(["export", str(d), "--jsonl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "records.jsonl: exists (--force" in err[0]
    assert (d / "records.jsonl").read_text() == "mine\n"
    assert cli_main(["export", str(d / "records.arrow"), "--jsonl", "--force"]) == 0
    assert (d / "records.jsonl").read_bytes() == want.read_bytes()
    assert not list(d.glob("*.partial"))
    out = d / "elsewhere.jsonl"
    assert cli_main(["export", str(d), "--jsonl", "--out", str(out)]) == 0
    assert out.read_bytes() == want.read_bytes()


@pytest.mark.parametrize("argv,says", [
    (["{d}"], "--jsonl"),
    (["{d}/nope", "--jsonl"], "no such run directory"),
    (["{e}", "--jsonl"], "records.arrow: not found"),
    (["{d}", "--jsonl", "--out", "{d}/no/such.jsonl"], "no such directory"),
    (["{bad}", "--jsonl"], "not an Arrow IPC stream"),
    (["{d}", "--jsonl", "--force", "--out", "{d}/records.arrow"], "being exported"),
])
def test_bad_input_is_one_line_and_exit_2(both, tmp_path, capsys, argv, says):
    _, d = both
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.arrow").write_text("not arrow")
    argv = [a.format(d=d, e=tmp_path / "empty", bad=tmp_path / "bad.arrow") for a in argv]
    assert cli_main(["export", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("loadgen: error: ") and says in err[0], err


def test_a_killed_writers_file_exports_what_it_flushed(both, tmp_path, capsys):
    _, d = both
    data = (d / "records.arrow").read_bytes()
    (tmp_path / "cut.arrow").write_bytes(data[:-8])          # no end mark: the writer killed
    assert cli_main(["export", str(tmp_path / "cut.arrow"), "--jsonl",
                     "--out", str(tmp_path / "cut.jsonl")]) == 0
    assert "no end mark after 40 records" in capsys.readouterr().err
    assert len((tmp_path / "cut.jsonl").read_bytes().splitlines()) == 40
