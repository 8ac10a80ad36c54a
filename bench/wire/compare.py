"""A client's records next to the wire: per-request TTFT and per-token ITL errors, client minus wire.

    records.jsonl (loadgen's schema, perf_counter_ns)      exchanges (bench.wire.http, pcap clock)
        id ──── the prompt starts with tag(id) = "rq000123" ──── found in the request body
    matched pair ─► durations only, each on its own clock:
        TTFT_client = first_token_at_ns − sent_at_ns      TTFT_wire = first token event − first request byte
        ITL (loadgen's definition, both sides): each gap between token chunks / tokens in the later
        chunk, once per token; chunk j of the record ↔ token event j on the wire
    optional ``offset_ns`` (CLOCK_REALTIME − CLOCK_MONOTONIC, read by the bench around the run):
        splits the TTFT error into send side (stamp → first request byte on the wire) and receive
        side (token on the wire → stamp), and gives every chunk's stamp lag. An estimate, labelled;
        the headline errors never use it.

Percentiles: nearest rank on the sorted values (as bench/client_capacity.py).
"""
from __future__ import annotations

import re
import statistics
from typing import Iterable, Optional

TAG_RE = re.compile(rb"rq(\d{6,})")


def tag(i: int) -> str:
    """The id tag a prompt starts with (matched back by ``TAG_RE``)."""
    return f"rq{i:06d}"


def pct(vals: list, q: float) -> Optional[float]:
    if not vals:
        return None
    v = sorted(vals)
    return v[min(len(v) - 1, max(0, round(q / 100 * (len(v) - 1))))]


def stats(vals: list) -> dict:
    """mean, p50, p99, max, n (ms in, ms out)."""
    if not vals:
        return {"n": 0, "mean": None, "p50": None, "p99": None, "max": None}
    return {"n": len(vals), "mean": statistics.fmean(vals), "p50": pct(vals, 50),
            "p99": pct(vals, 99), "max": max(vals)}


def per_token_itl(chunks: list) -> list:
    """loadgen's ITL on ``[(t_ns, n_tokens>0), ...]``: gap / n, once per token, in ms."""
    out = []
    for (t0, _), (t1, n) in zip(chunks, chunks[1:]):
        out.extend([(t1 - t0) / n / 1e6] * n)
    return out


def match(exchanges: Iterable, records: Iterable[dict], phase: str = "measured") -> dict:
    """``{"pairs": [(record, exchange)], ...counts}``: records of ``phase`` with status ok."""
    by_id: dict[int, object] = {}
    dup = 0
    for ex in exchanges:
        if ex.method != "POST" or "completions" not in ex.path:
            continue
        mo = TAG_RE.search(ex.request_body)
        if mo is None:
            continue
        i = int(mo.group(1))
        if i in by_id:
            dup += 1
        by_id[i] = ex
    pairs, missing, not_ok = [], 0, 0
    for r in records:
        if r.get("phase") != phase:
            continue
        if r.get("status") != "ok":
            not_ok += 1
            continue
        ex = by_id.pop(r["id"], None)
        if ex is None:
            missing += 1
            continue
        pairs.append((r, ex))
    return {"pairs": pairs, "records_without_wire": missing, "records_not_ok": not_ok,
            "duplicate_tags": dup}


def errors(pairs: list, offset_ns: Optional[int] = None) -> dict:
    """Client-minus-wire errors (ms) over matched ``(record, exchange)`` pairs."""
    c_ttft, w_ttft, e_ttft = [], [], []
    c_itl, w_itl, gap_err = [], [], []
    send_lag, recv_first, recv_all = [], [], []
    by_pos: dict = {"first": [], "early": [], "middle": [], "last3": []}
    mismatched = incomplete = 0
    for r, ex in pairs:
        wt = ex.token_events
        if not ex.complete or not wt or r.get("first_token_at_ns") is None or r.get("sent_at_ns") is None:
            incomplete += 1
            continue
        ct = [(t, n) for t, n in r["chunks"] if n > 0]
        cw = (r["first_token_at_ns"] - r["sent_at_ns"]) / 1e6
        ww = (wt[0].t_ns - ex.request_first_ns) / 1e6
        c_ttft.append(cw)
        w_ttft.append(ww)
        e_ttft.append(cw - ww)
        if offset_ns is not None:
            send_lag.append((ex.request_first_ns - (r["sent_at_ns"] + offset_ns)) / 1e6)
            recv_first.append((r["first_token_at_ns"] + offset_ns - wt[0].t_ns) / 1e6)
        if len(ct) != len(wt):
            mismatched += 1
            continue
        wch = [(e.t_ns, e.n) for e in wt]
        c_itl.extend(per_token_itl(ct))
        w_itl.extend(per_token_itl(wch))
        for j in range(1, len(ct)):
            gap_err.append(((ct[j][0] - ct[j - 1][0]) - (wch[j][0] - wch[j - 1][0])) / 1e6)
        if offset_ns is not None:
            lags = [(c + offset_ns - w) / 1e6 for (c, _), (w, _) in zip(ct, wch)]
            recv_all.extend(lags)
            nn = len(lags)
            for j, v in enumerate(lags):
                by_pos["first" if j == 0 else "last3" if j >= nn - 3 else "early" if j < 10
                       else "middle"].append(v)
    out = {
        "requests": len(e_ttft), "incomplete": incomplete, "chunk_count_mismatch": mismatched,
        "ttft_client_ms": stats(c_ttft), "ttft_wire_ms": stats(w_ttft),
        "ttft_err_ms": stats(e_ttft),                     # per request, client − wire
        "itl_client_ms": stats(c_itl), "itl_wire_ms": stats(w_itl),
        "itl_gap_err_ms": stats(gap_err),                  # per chunk gap, client − wire
        "itl_gap_abs_err_ms_p99": pct([abs(g) for g in gap_err], 99),
    }
    cm, wm = out["itl_client_ms"], out["itl_wire_ms"]
    out["itl_err_ms_mean"] = cm["mean"] - wm["mean"] if cm["n"] and wm["n"] else None
    out["itl_err_ms_p99"] = cm["p99"] - wm["p99"] if cm["n"] and wm["n"] else None
    ct_, wt_ = out["ttft_client_ms"], out["ttft_wire_ms"]
    out["ttft_p99_diff_ms"] = ct_["p99"] - wt_["p99"] if ct_["n"] else None   # p99(client) − p99(wire)
    if offset_ns is not None:
        out["split_estimate"] = {
            "note": "one REALTIME−MONOTONIC offset read by the bench around the run; an estimate",
            "send_lag_ms": stats(send_lag),               # sent_at stamp → first request byte on the wire
            "recv_lag_first_token_ms": stats(recv_first),  # first token on the wire → client stamp
            "recv_lag_all_chunks_ms": stats(recv_all),
            # where in a stream the stamps are late: chunk 0, 1-9, the middle, the last 3
            "recv_lag_by_position_ms": {k: stats(v) for k, v in by_pos.items()}}
    return out


def server_to_wire(server_log: list[dict], exchanges: list, offset_ns: int) -> dict:
    """Sanity of the offset and of the capture: server write stamp → token packet, per chunk (ms).
    ``server_log``: the calibration server's GET /calib/log (prompt starts with the tag)."""
    by_tag = {}
    for ex in exchanges:
        mo = TAG_RE.search(ex.request_body)
        if mo:
            by_tag[int(mo.group(1))] = ex
    lags = []
    for e in server_log:
        mo = TAG_RE.search(str(e.get("prompt", "")).encode())
        ex = by_tag.get(int(mo.group(1))) if mo else None
        if ex is None:
            continue
        s_tok = [t for t, n in e["chunks"] if n > 0]
        w_tok = [ev.t_ns for ev in ex.token_events]
        if len(s_tok) == len(w_tok):
            lags.extend((w - (s + offset_ns)) / 1e6 for s, w in zip(s_tok, w_tok))
    return stats(lags)
