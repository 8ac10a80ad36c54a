"""What a run directory's files say is checked on read (issue 41 items 11, 12, 18; issue 38):
tampered records are left out of the figures and make the verdict INVALID, naming what and how
many; a file that does not read is one line naming FILE[:LINE] and exit 2; compare recomputes
from the records and never prints what a hand-edited summary.json claims."""
import json
import math

import pytest

from analysis.contract.records import read_table
from analysis.contract.sanity import TOKENS_MAX, record_faults
from loadgen import cli
from tests.analysis.report.test_compare import _run
from tests.analysis.synth import MS, server_meta, steady, write_run

N = 40


def _dir(tmp_path, name="run", edit=lambda recs: recs):
    meta = server_meta(num_requests=N, schedule={"scheduled_count": N})
    return write_run(tmp_path / name, edit(steady(N)), meta)


def _report(capsys, d):
    rc = cli.main(["report", "--no-plots", "--json", str(d)])
    out, err = capsys.readouterr()
    return rc, (json.loads(out.splitlines()[-1]) if rc == 0 else None), err.strip()


def _edit(d, name, fn):
    p = d / name
    p.write_text(fn(p.read_text()))


def test_a_clean_run_stays_valid(tmp_path, capsys):
    rc, s, err = _report(capsys, _dir(tmp_path))
    assert rc == 0 and err == "verdict: VALID" and s["requests_completed"] == N
    assert s["verdict"]["records_excluded"] == 0


def test_duplicate_ids_are_left_out_and_named(tmp_path, capsys):
    rc, s, err = _report(capsys, _dir(tmp_path, edit=lambda r: r + [dict(x) for x in r[:5]]))
    assert rc == 0 and not s["verdict"]["valid"]
    assert "5 duplicate request ids" in err
    assert s["requests_completed"] == N and s["verdict"]["records_excluded"] == 5


def test_more_distinct_ids_than_planned_is_invalid(tmp_path, capsys):
    def extra(recs):
        more = [dict(x, id=N + k) for k, x in enumerate(recs[:5])]
        return recs + more
    rc, s, err = _report(capsys, _dir(tmp_path, edit=extra))
    assert rc == 0 and "45 measured records for 40 planned" in err


def test_end_before_send_is_left_out_and_named(tmp_path, capsys):
    def late_send(recs):
        for r in recs[:3]:
            r["sent_at_ns"] = r["end_at_ns"] + 1000 * MS
        return recs
    rc, s, err = _report(capsys, _dir(tmp_path, edit=late_send))
    assert rc == 0 and not s["verdict"]["valid"]
    assert "3 records with end before send" in err
    assert s["requests_completed"] == N - 3 and s["e2el_ms"]["min"] > 0
    assert s["ttft_ms"]["min"] > 0


def test_chunks_out_of_order_are_left_out(tmp_path, capsys):
    def swap(recs):
        ch = recs[7]["chunks"]
        ch[2], ch[3] = ch[3], ch[2]
        return recs
    rc, s, err = _report(capsys, _dir(tmp_path, edit=swap))
    assert "1 record with chunk times out of order" in err and s["requests_completed"] == N - 1


def test_absurd_token_counts_are_left_out(tmp_path, capsys):
    rc, clean, _ = _report(capsys, _dir(tmp_path, "clean"))

    def absurd(recs):
        recs[3]["output_tokens"] = 10 ** 30
        recs[4]["output_tokens"] = -50
        return recs
    rc, s, err = _report(capsys, _dir(tmp_path, edit=absurd))
    assert rc == 0 and f"2 records with a token count negative or above {TOKENS_MAX:,}" in err
    assert 0 < s["output_throughput"] <= clean["output_throughput"]
    assert s["total_token_throughput"] < 1e6


def test_record_faults_is_vectorised_and_counts_each_rule(tmp_path):
    d = _dir(tmp_path, edit=lambda r: r + [dict(r[0])])
    f = record_faults(read_table(d / "records.jsonl"))
    assert f.count == 1 and f.bad.tolist() == [False] * N + [True]
    assert record_faults(read_table(d / "records.jsonl")) is f      # checked once per read


@pytest.mark.parametrize("name", ["meta.json", "sut.json"])
def test_a_garbled_json_file_is_one_line_exit_2_on_report(tmp_path, capsys, name):
    d = _dir(tmp_path)
    (d / name).write_text("{garbage")
    rc, _, err = _report(capsys, d)
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"loadgen: error: {d}/{name}: not JSON")


def test_a_garbled_records_line_is_one_line_naming_file_and_line(tmp_path, capsys):
    d = _dir(tmp_path)
    _edit(d, "records.jsonl", lambda t: "\n".join(
        ln[:40] if i == 5 else ln for i, ln in enumerate(t.splitlines())) + "\n")
    rc, _, err = _report(capsys, d)
    assert rc == 2 and err == f"loadgen: error: {d}/records.jsonl:6: not JSON"


def test_a_time_beyond_64_bits_is_one_line(tmp_path, capsys):
    d = _dir(tmp_path, edit=lambda r: [dict(r[0], sent_at_ns=10 ** 30)] + r[1:])
    rc, _, err = _report(capsys, d)
    assert rc == 2 and len(err.splitlines()) == 1 and "records.jsonl:1: sent_at_ns" in err


def test_a_torn_last_line_is_invalid_not_an_error(tmp_path, capsys):
    d = _dir(tmp_path)
    _edit(d, "records.jsonl", lambda t: t[:-60])
    rc, s, err = _report(capsys, d)
    assert rc == 0 and not s["verdict"]["valid"]
    assert "1 of 40 planned measured requests have no record" in err


def _compare(capsys, *dirs):
    rc = cli.main(["compare", *map(str, dirs)])
    out, err = capsys.readouterr()
    return rc, out, err.strip()


def _pair(tmp_path, capsys):
    a, b = _run(tmp_path, "a", 1), _run(tmp_path, "b", 2)
    for d in (a, b):
        assert cli.main(["report", "--no-plots", str(d)]) == 0
    capsys.readouterr()
    return a, b


def test_compare_never_prints_a_hand_edited_summary(tmp_path, capsys):
    a, b = _pair(tmp_path, capsys)
    s = json.loads((b / "summary.json").read_text())
    true_goodput = s["goodput"]
    s.update(goodput=1e308, request_throughput=math.inf, output_throughput=math.nan)
    (b / "summary.json").write_text(json.dumps(s))
    rc, out, err = _compare(capsys, a, b)
    assert rc == 0
    table = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert not any(w in ln for ln in table for w in ("inf", "nan", "e+308"))
    row = next(ln for ln in table if ln.startswith("| goodput (req/s)"))
    assert f"{true_goodput:.3f}" in row
    assert f"{b}: summary.json says goodput (req/s) 1e+308, its records give" in out


@pytest.mark.parametrize("name", ["meta.json", "sut.json", "summary.json"])
def test_a_garbled_file_is_one_line_exit_2_on_compare(tmp_path, capsys, name):
    a, b = _pair(tmp_path, capsys)
    (b / name).write_text("{garbage")
    rc, out, err = _compare(capsys, a, b)
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"loadgen: error: {b}/{name}: not JSON")


def test_a_garbled_records_line_is_one_line_on_compare(tmp_path, capsys):
    a, b = _pair(tmp_path, capsys)
    _edit(b, "records.jsonl", lambda t: "\n".join(
        ln[:30] if i == 1 else ln for i, ln in enumerate(t.splitlines())) + "\n")
    rc, out, err = _compare(capsys, a, b)
    assert rc == 2 and err == f"loadgen: error: {b}/records.jsonl:2: not JSON"


def test_compare_labels_each_ttft_for_what_it_is(tmp_path, capsys):
    meta = dict(num_requests=N, min_queries=0, min_duration_s=0)
    a = write_run(tmp_path / "a", steady(N), server_meta(**meta))
    b = write_run(tmp_path / "b", steady(N, lag_ms=3), server_meta(**meta))
    for d in (a, b):
        (d / "scenario.yaml").write_text("workload: {source: synthetic}\nload: {mode: server}\n")
    rc, out, err = _compare(capsys, a, b)
    assert rc == 0, err
    first, noise = out.split("## Change and noise")
    assert "| TTFT from scheduled p50 (ms) |" in first and "| TTFT p50 (ms)" not in first
    assert "| TTFT from send p50 (ms) |" in noise and "| TTFT p50 (ms)" not in noise


def test_a_summary_with_nan_or_infinity_is_recomputed_for_notebooks(tmp_path, capsys):
    import loadgen
    d = _dir(tmp_path)
    assert cli.main(["report", "--no-plots", str(d)]) == 0
    s = json.loads((d / "summary.json").read_text())
    true = s["goodput"]
    s["goodput"] = math.inf
    (d / "summary.json").write_text(json.dumps(s))
    assert loadgen.open_run(d).summary.goodput == true


def test_cancel_audio_retries_and_models_blocks_are_typed_like_accuracy_and_cost():
    from analysis.contract import Summary
    s = Summary.read({"cancel": {"requests_aborted": 3, "with_first_token": 2, "leaked": False},
                      "retries": {"requests": 1, "attempts": 3, "wait_s": 0.5},
                      "audio": {"rtfx": 12.5, "requests": 4, "requests_sent": 4},
                      "models": {"base": {"requests": 5, "completed": 5, "goodput": 1.5}}})
    assert s.cancel.requests_aborted == 3 and s.retries.attempts == 3
    assert s.audio.rtfx == 12.5 and s.models["base"].goodput == 1.5


def test_validate_run_dir_names_what_the_records_say(tmp_path):
    from analysis.contract import validate_run_dir
    d = _dir(tmp_path, edit=lambda r: r + [dict(r[0])])
    assert validate_run_dir(d, written=False) == [
        "records.jsonl: 1 duplicate request id (a later line repeats an earlier line's id)"]
