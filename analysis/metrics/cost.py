"""summary.json ``cost``: dollars per million tokens, from the measured window and joules.

    meta ``cost`` {usd_per_hour (per accelerator), usd_per_kwh, accelerators}
    + the window (summary duration_s), completed measured records' tokens, the SLO's goodput
      requests, the energy block (energy_j over its window, j_per_output_token)
        ─► cost_block ─► {usd_per_million_output_tokens, usd_per_million_input_tokens,
                          usd_per_million_tokens_at_slo, energy_usd_per_million_output_tokens,
                          usd_per_million_total_tokens, window_usd, how, inputs}

Rules (docs/metrics.md "Cost"): the run's time cost is the MEASURED window (first send to last
end) × usd_per_hour × accelerators — the accelerators are held the whole window, busy or not.
  usd_per_million_output_tokens   window cost / output tokens × 1e6: ALL-IN (prompt processing
                                  included: the whole time is charged to the output tokens)
  usd_per_million_input_tokens    null: one accelerator-hour serves prefill and decode at once
                                  (continuous batching) and the client measures no per-phase
                                  accelerator time; pricing input tokens on the whole window too
                                  would count the time twice (the documented non-split)
  usd_per_million_total_tokens    window cost / (input + output tokens) × 1e6: every token alike
  usd_per_million_tokens_at_slo   window cost / output tokens of the requests meeting every SLO
                                  limit (goodput) × 1e6: what a million USEFUL tokens cost
  energy_usd_per_million_output_tokens  measured J / output token × 1e6 / 3.6e6 J/kWh ×
                                  usd_per_kwh (the energy block's window and tokens); an
                                  ESTIMATED energy (status "estimated") is not priced: null with
                                  the reason, as joules_per_output_token (metrics/capacity.py)
Every missing input (no price, no window, no tokens, no SLO, energy unmeasured) gives null with
its reason in ``how``; never a default price. Pure: no I/O.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.meta import CostPrice, RunMeta
from analysis.contract.records import as_records
from analysis.contract.summary_blocks import Energy

J_PER_KWH = 3.6e6
FIGURES = ("usd_per_million_output_tokens", "usd_per_million_input_tokens",
           "usd_per_million_tokens_at_slo", "energy_usd_per_million_output_tokens",
           "usd_per_million_total_tokens")


def window_usd(duration_s: Optional[float], usd_per_hour: Optional[float],
               accelerators: int) -> Optional[float]:
    """The time cost of the measured window: hours × price per accelerator-hour × accelerators."""
    if duration_s is None or usd_per_hour is None:
        return None
    return duration_s / 3600.0 * usd_per_hour * accelerators


def per_million(usd: Optional[float], tokens: Optional[float]) -> Optional[float]:
    return None if usd is None or not tokens else usd / tokens * 1e6


def energy_usd_per_million(j_per_token: Optional[float], usd_per_kwh: Optional[float]
                           ) -> Optional[float]:
    if j_per_token is None or usd_per_kwh is None:
        return None
    return j_per_token * 1e6 / J_PER_KWH * usd_per_kwh


def _sum(recs: list, key: str) -> Optional[int]:
    vals = [getattr(r, key) for r in as_records(recs)]
    return None if not vals or any(v is None for v in vals) else int(sum(vals))


def cost_block(price: Optional[dict | CostPrice], duration_s: Optional[float], done: list,
               goodput_recs: Optional[list], goodput_why: Optional[str],
               energy: Optional[dict | Energy]) -> Optional[dict]:
    """The "cost" object; None when the scenario gave no cost block. ``done``: completed measured
    records; ``goodput_recs``: those meeting every SLO limit (None: no SLO judged, why in
    ``goodput_why``); ``energy``: summary.json's energy block."""
    if not price:
        return None
    price = CostPrice.read(price)
    hourly, kwh = price.usd_per_hour, price.usd_per_kwh
    acc = int(price.accelerators or 1)
    usd = window_usd(duration_s, hourly, acc)
    out_tok, in_tok = _sum(done, "output_tokens"), _sum(done, "prompt_tokens")
    slo_tok = _sum(goodput_recs, "output_tokens") if goodput_recs is not None else None
    energy = Energy.read(energy)
    estimated = energy.status == "estimated"      # never priced (as capacity.py's J/tok)
    jpt = None if estimated else energy.j_per_output_token
    how: dict[str, str] = {}
    no_time = ("null: no usd_per_hour in the scenario's cost block" if hourly is None else
               "null: no measurement window (no measured request was sent and ended)"
               if duration_s is None else None)
    window = (f"window {duration_s:.6g} s × ${hourly:g}/h per accelerator × {acc} "
              f"accelerator(s) = ${usd:.6g}" if usd is not None else None)
    figs = {k: None for k in FIGURES}
    figs["usd_per_million_output_tokens"] = per_million(usd, out_tok)
    how["usd_per_million_output_tokens"] = no_time or (
        f"all-in: {window} ÷ {out_tok} output tokens × 1e6 (prompt processing included)"
        if out_tok else "null: no output tokens counted (no completed request, or one "
                        "without an output count)")
    how["usd_per_million_input_tokens"] = (
        "null (not split): prefill and decode share the accelerator time and no per-phase "
        "accelerator time is measured; the whole window is in usd_per_million_output_tokens "
        "(all-in) — pricing input on the whole window as well would count it twice")
    figs["usd_per_million_total_tokens"] = per_million(
        usd, None if out_tok is None or in_tok is None else out_tok + in_tok)
    how["usd_per_million_total_tokens"] = no_time or (
        f"{window} ÷ ({in_tok} input + {out_tok} output tokens) × 1e6 (every token alike)"
        if in_tok is not None and out_tok is not None and in_tok + out_tok
        else "null: token counts missing")
    figs["usd_per_million_tokens_at_slo"] = per_million(usd, slo_tok)
    how["usd_per_million_tokens_at_slo"] = no_time or (
        f"null: {goodput_why or 'no SLO limit was judged'}" if goodput_recs is None else
        f"{window} ÷ {slo_tok} output tokens of the {len(goodput_recs)} requests meeting every "
        "SLO limit (goodput) × 1e6" if slo_tok else
        "null: no request met the SLO (no goodput tokens)")
    figs["energy_usd_per_million_output_tokens"] = energy_usd_per_million(jpt, kwh)
    how["energy_usd_per_million_output_tokens"] = (
        "null: no usd_per_kwh in the scenario's cost block" if kwh is None else
        "null: energy estimated, not measured: an estimate is not priced (as "
        "joules_per_output_token)" + (f" ({energy.reason})" if energy.reason else "")
        if estimated else
        f"null: energy {energy.status or 'unmeasured'}"
        + (f" ({energy.reason})" if energy.reason else "") if jpt is None else
        f"{jpt:.6g} J/output token (energy block, {energy.status}) × 1e6 ÷ 3.6e6 J/kWh "
        f"× ${kwh:g}/kWh")
    return {**figs, "window_usd": usd, "how": how,
            "inputs": {"usd_per_hour": hourly, "usd_per_kwh": kwh, "accelerators": acc,
                       "accelerators_source": price.accelerators_source,
                       "window_s": duration_s, "output_tokens": out_tok, "input_tokens": in_tok,
                       "goodput_output_tokens": slo_tok,
                       "energy_j": None if estimated else energy.energy_j,
                       "j_per_output_token": jpt}}


def run_cost(records: list, meta: dict, slo: dict, summary: dict, from_scheduled: bool
             ) -> Optional[dict]:
    """cost_block for one run's records and its summary so far (duration_s, goodput, energy)."""
    price = RunMeta.read(meta).cost
    if not price:
        return None
    from analysis.metrics import figures as m
    done = m.completed(m.measured(records))
    good = None
    if summary.get("goodput") is not None:
        mask = m.meets_slo_mask(records, slo, from_scheduled)
        good = [r for r, ok in zip(records, mask) if ok]
    return cost_block(price, summary.get("duration_s"), done, good,
                      str(summary.get("goodput_rule") or "") or None, summary.get("energy"))
