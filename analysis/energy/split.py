"""Per-request energy: split each sampling interval's energy across the requests in flight.

    grid [t_0 .. t_K] and interval energies E_k (from energy.py, summed over measured sources)
    records (chunks [[t_ns, n_tokens], ...]) ─► tokens of request r in (t_k, t_k+1] = n_rk
    share_rk = E_k * n_rk / sum_r n_rk                     (token-weighted)
    intervals where requests are in flight but no token arrives: E_k split by time in flight
    intervals with nothing in flight: "unattributed" (idle gaps inside the window)

So sum_r share_r + unattributed == window energy, exactly. A request's share up to and including
its first token is its prefill energy, the rest its decode energy. A request waiting for its first
token while others stream tokens gets energy only from its first token's interval: the split follows
where tokens come out, which is the stated method, not a model of the accelerator's work.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.contract.records import RecordIn, Records, as_record, as_records


def token_events(rec: RecordIn) -> list[tuple[int, int]]:
    """(t_ns, n_tokens) of every chunk carrying tokens; a non-streamed answer is one event at its end."""
    rec = as_record(rec)
    ev = [(int(c[0]), int(c[1])) for c in rec.chunks or [] if c and c[1] and c[1] > 0]
    if not ev and rec.output_tokens and rec.end_at_ns is not None:
        ev = [(int(rec.end_at_ns), int(rec.output_tokens))]
    return ev


def split_energy(grid_ns: np.ndarray, e_j: np.ndarray, records: Records) -> dict:
    """Per-request (prefill_j, decode_j) arrays aligned with ``records`` and the unattributed rest.

    grid_ns: int64 [K+1] increasing interval edges; e_j: float64 [K] energy of each interval.
    """
    records = as_records(records)
    n_rec, k_int = len(records), len(e_j)
    prefill = np.zeros(n_rec)
    decode = np.zeros(n_rec)
    if k_int == 0:
        return {"prefill_j": prefill, "decode_j": decode, "unattributed_j": 0.0}
    g = np.asarray(grid_ns, dtype=np.int64)
    # token-weighted part
    rec_idx, k_idx, n_tok, is_first = [], [], [], []
    for r, rec in enumerate(records):
        ev = token_events(rec)
        first_t = ev[0][0] if ev else None
        for t, n in ev:
            if g[0] < t <= g[-1]:
                rec_idx.append(r)
                k_idx.append(int(np.searchsorted(g, t, side="left")) - 1)
                n_tok.append(n)
                is_first.append(t == first_t)
    tokens_k = np.zeros(k_int)
    if k_idx:
        ri, ki = np.asarray(rec_idx), np.asarray(k_idx)
        nt, fi = np.asarray(n_tok, dtype=np.float64), np.asarray(is_first, dtype=bool)
        np.add.at(tokens_k, ki, nt)
        share = e_j[ki] * nt / tokens_k[ki]
        np.add.at(prefill, ri[fi], share[fi])
        np.add.at(decode, ri[~fi], share[~fi])
    # time-weighted part, for intervals without tokens
    todo = (tokens_k == 0) & (e_j != 0)
    spans = [_span(rec) for rec in records]
    overlap_k = np.zeros(k_int)
    parts: list[tuple[int, np.ndarray, np.ndarray, Optional[int]]] = []
    if todo.any():
        lo_edge, hi_edge = g[:-1], g[1:]
        for r, span in enumerate(spans):
            if span is None:
                continue
            s, e, ft = span
            a = max(int(np.searchsorted(g, s, side="right")) - 1, 0)
            b = min(int(np.searchsorted(g, e, side="left")), k_int)
            if b <= a:
                continue
            ks = np.arange(a, b)[todo[a:b]]
            if not len(ks):
                continue
            ov = (np.minimum(hi_edge[ks], e) - np.maximum(lo_edge[ks], s)).astype(np.float64)
            keep = ov > 0
            ks, ov = ks[keep], ov[keep]
            overlap_k[ks] += ov
            parts.append((r, ks, ov, ft))
        for r, ks, ov, ft in parts:
            energy = e_j[ks] * ov / overlap_k[ks]
            if ft is None:
                prefill[r] += energy.sum()
                continue
            before = (np.minimum(hi_edge[ks], ft) - np.maximum(lo_edge[ks], spans[r][0]))
            frac = np.clip(before / ov, 0.0, 1.0)
            prefill[r] += float(np.sum(energy * frac))
            decode[r] += float(np.sum(energy * (1 - frac)))
    unattributed = float(np.sum(e_j[todo & (overlap_k == 0)]))
    return {"prefill_j": prefill, "decode_j": decode, "unattributed_j": unattributed}


def _span(rec: RecordIn) -> Optional[tuple[int, int, Optional[int]]]:
    s = rec.sent_at_ns
    if s is None:
        return None
    ev = token_events(rec)
    e = rec.end_at_ns
    if e is None:
        e = ev[-1][0] if ev else None
    if e is None or e <= s:
        return None
    ft = rec.first_token_at_ns
    if ft is None and ev:
        ft = ev[0][0]
    return int(s), int(e), (int(ft) if ft is not None else None)


def distribution(records: Records, split: dict, start_ns: int, end_ns: int) -> dict:
    """Per-request figures for the measured, successful requests lying wholly inside the window."""
    records = as_records(records)
    total = split["prefill_j"] + split["decode_j"]
    sel = [i for i, r in enumerate(records)
           if (r.phase or "measured") == "measured" and r.status == "ok"
           and r.sent_at_ns is not None and r.end_at_ns is not None
           and r.sent_at_ns >= start_ns and r.end_at_ns <= end_ns]
    out: dict = {
        "requests_in_window": len(sel),
        "attributed_j": float(total.sum()),
        "unattributed_j": split["unattributed_j"],
        "prefill_j": float(split["prefill_j"].sum()),
        "decode_j": float(split["decode_j"].sum()),
    }
    if not sel:
        out.update(mean_j=None, p50_j=None, p90_j=None, p99_j=None,
                   mean_prefill_j=None, mean_decode_j=None)
        return out
    v = total[sel]
    out.update(mean_j=float(v.mean()), p50_j=float(np.percentile(v, 50)),
               p90_j=float(np.percentile(v, 90)), p99_j=float(np.percentile(v, 99)),
               mean_prefill_j=float(split["prefill_j"][sel].mean()),
               mean_decode_j=float(split["decode_j"][sel].mean()))
    return out
