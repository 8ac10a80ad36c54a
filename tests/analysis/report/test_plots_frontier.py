"""The frontier plot (analysis/report/plots_frontier.py): the SLO bound, labels, a refusal."""
from analysis.metrics import frontier as f
from analysis.report import plots
from analysis.report import plots_frontier as pf


def _row(v, x, y):
    return {"value": v, "run_dir": f"concurrency-{v:g}", "valid": True,
            "interactivity_tok_s": {"p50": x}, "output_throughput_per_accelerator": y}


def test_frontier_plot_and_its_refusal():
    assert pf.slo_interactivity_min({"tpot_ms": 50}) == 20.0
    assert pf.slo_interactivity_min({"tpot_ms": None}) is None
    assert pf.point_label("load.rate", 2.5) == "r=2.5" and pf.point_label("load.concurrency", 4.0) == "c=4"
    empty = f.frontier([_row(1, None, 5)], "load.concurrency")
    png, note = pf.frontier_png([("x", empty)])
    assert png is None
    if plots.available():
        assert note.startswith("frontier not drawn: no point has both")
        png, note = pf.frontier_png([("x", f.frontier([_row(1, 10, 5), _row(2, 8, 9)],
                                                      "load.concurrency"))], {"tpot_ms": 200})
        assert png[:4] == b"\x89PNG" and "shaded: below the TPOT SLO's speed" in note
