"""An estimated energy is not priced (analysis.metrics.cost): ``joules_per_output_token`` is null
for an estimate (analysis.metrics.capacity), and so is ``energy_usd_per_million_output_tokens``,
with the reason; before, the estimate was priced and printed "energy $0.03405/M output tok"
with no label."""
from analysis.metrics.capacity import joules_per_output_token
from analysis.metrics.cost import cost_block
from analysis.report.cost_accuracy import cost_line

PRICE = {"usd_per_hour": 3.6, "usd_per_kwh": 0.36, "accelerators": 1}
DONE = [{"output_tokens": 8, "prompt_tokens": 10}] * 20
ESTIMATE = {"status": "estimated", "evidence": "estimated", "energy_j": 54.0,
            "j_per_output_token": 0.3405, "reason": "no measured source (nvml: not available)"}


def test_an_estimated_energy_is_null_with_its_reason_like_joules_per_output_token():
    c = cost_block(PRICE, 1.0, DONE, None, None, ESTIMATE)
    assert joules_per_output_token(ESTIMATE)[0] is None
    assert c["energy_usd_per_million_output_tokens"] is None
    how = c["how"]["energy_usd_per_million_output_tokens"]
    assert how.startswith("null: energy estimated") and "not priced" in how
    assert c["inputs"]["j_per_output_token"] is None and c["inputs"]["energy_j"] is None
    assert "energy n/a" in cost_line({"cost": c})
    assert c["usd_per_million_output_tokens"] is not None        # the time cost stands


def test_a_measured_energy_is_still_priced():
    measured = {**ESTIMATE, "status": "measured", "evidence": "measured", "reason": None}
    c = cost_block(PRICE, 1.0, DONE, None, None, measured)
    assert c["energy_usd_per_million_output_tokens"] == 0.3405 * 1e6 / 3.6e6 * 0.36
    assert c["inputs"]["j_per_output_token"] == 0.3405
