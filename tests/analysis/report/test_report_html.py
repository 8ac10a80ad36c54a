"""report.html in headless Chromium: it loads without errors, every plot decodes, and a
screenshot of the sweep report is a real picture. Skipped when chromium is not installed.
"""
import json
import re
from pathlib import Path

import pytest

from analysis.report import plots
from analysis.report import run_report
from analysis.report import sweep as report_sweep
from tests.analysis.synth import MS, jax_sut, power_rows, server_meta, spec_file, steady, \
    write_run, write_sweep
from tests.support import chromium

pytestmark = pytest.mark.skipif(chromium.find() is None or not plots.available(),
                                reason="chromium or matplotlib not installed")
JS_ERROR = re.compile(r"Uncaught|CONSOLE\(\d+\).*(error|Error)|ERR_FILE_NOT_FOUND|"
                      r"Not allowed to load")


def _probe(page: Path, tmp: Path) -> dict:
    copy = chromium.probe_copy(page, page.with_name("probe.html"))
    res = chromium.run(copy, tmp, "--dump-dom", "--virtual-time-budget=5000")
    assert res.returncode == 0, res.stderr[-2000:]
    assert not JS_ERROR.search(res.stderr), res.stderr[-2000:]
    m = re.search(r"<pre id=\"probe\">(.*?)</pre>", res.stdout, re.S)
    assert m, "the probe did not run: " + res.stdout[-500:]
    return json.loads(m.group(1).replace("&quot;", '"'))


def test_run_report_loads_and_its_plots_decode(tmp_path):
    recs = steady(40)
    meta = server_meta(power_sources=[{"name": "nvml", "status": "ok", "evidence": "measured"}])
    d = write_run(tmp_path / "run", recs, meta, jax_sut())
    end = max(r["end_at_ns"] for r in recs) / MS
    (d / "power.jsonl").write_text("".join(json.dumps(r) + "\n"
                                           for r in power_rows(0, end, 150.0)))
    _, page = run_report.write_report(d)
    got = _probe(page, tmp_path)
    assert got["errors"] == []
    assert len(got["images"]) == 3          # CDFs, time series, timeline
    for complete, w, h in got["images"]:
        assert complete and w > 300 and h > 100


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_sweep_report_screenshot(tmp_path):
    spec = spec_file(tmp_path / "spec.json", bandwidth=4e7, peak=4e9)
    sw = write_sweep(tmp_path / "sweep", values=(1, 2, 4), spec_path=spec)
    _, page = report_sweep.write_sweep_report(sw)
    got = _probe(page, tmp_path)
    assert got["errors"] == [] and len(got["images"]) == 4
    assert all(c and w > 300 for c, w, _ in got["images"])
    shot = tmp_path / "shot.png"
    res = chromium.run(page, tmp_path, f"--screenshot={shot}", "--hide-scrollbars")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    from PIL import Image
    img = Image.open(shot).convert("RGB")
    assert img.size == (1200, 2000)
    colors = img.getcolors(maxcolors=1 << 20) or []
    # a rendered page, not a blank one: many colours (plots, table shading, headings)
    assert len(colors) > 200
    # the title's rule and the plot lines are drawn in the report's blue (#3b6ea5)
    blue = sum(n for n, (r, g, b) in colors if abs(r - 59) < 25 and abs(g - 110) < 25
               and abs(b - 165) < 25)
    assert blue > 2000
