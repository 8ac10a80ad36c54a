"""Headless Chromium for report tests: find the binary, load a page, dump its DOM or screenshot.

Debian's ``chromium`` package (or $LOADGEN_CHROMIUM). Every run gets a fresh profile directory and
no network features, so a test never reaches beyond the file it opens.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--enable-logging=stderr", "--v=0"]


def find() -> Optional[str]:
    env = os.environ.get("LOADGEN_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run(page: Path, tmp: Path, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Load ``page`` (a local file) with the given extra flags; stdout and stderr captured."""
    exe = find()
    if exe is None:
        raise RuntimeError("chromium not found")
    args = [exe, *FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}",
            "--window-size=1200,2000", *extra, page.resolve().as_uri()]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)


# appended to a copy of the report: records, after load, how each image decoded
PROBE = """<script>window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var out = imgs.map(function (i) { return [i.complete, i.naturalWidth, i.naturalHeight]; });
  var pre = document.createElement('pre'); pre.id = 'probe';
  pre.textContent = JSON.stringify({images: out, errors: window.__errors || []});
  document.body.appendChild(pre);
});
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push(String(e.message)); }, true);
</script>"""


def probe_copy(page: Path, dest: Path) -> Path:
    """A copy of ``page`` with PROBE placed first in <head> (so it sees every error)."""
    html = page.read_text(encoding="utf-8")
    dest.write_text(html.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    return dest
