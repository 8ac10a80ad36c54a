"""Report files on disk: each written whole or not at all, a failure said once and kept.

    blocks ─► render_md / render_html ─► write_pages(dir, blocks, stem)
        ─► dir/STEM.md, dir/STEM.html through analysis.atomic.write_all (both temps written and
            fsync'd, then both renamed: the two files are the new pair or the old one)
    a write that fails (ENOSPC, EFBIG, EIO, ...) ─► no partial file (the temps are removed; an
        older report stays as it was, both files) ─► dir/report.error.txt with the reason (itself atomic; skipped
        when even that cannot be written) ─► StorageError, one line naming the file, the cause
        and the command that writes the report again (`loadgen report DIR`); the CLI prints it
        and exits 1. The run's records, meta.json and summary.json are untouched.

Used by the run, sweep and repeat reports (run_report, sweep, repeats) and the frontier figure.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from analysis.atomic import StorageError, why, write_all, write_bytes, write_text
from analysis.report.render import Block, render_html, render_md

ERROR_FILE = "report.error.txt"


def redo_hint(d: Path) -> str:
    return f"the run's records are kept: `loadgen report {d}` writes the report again"


def failed(d: Path, e: OSError) -> StorageError:
    """report.error.txt (when it can be written) and the one-line StorageError for ``e``."""
    line = str(e) if isinstance(e, StorageError) else f"{getattr(e, 'filename', None) or d}: " \
        f"could not be written ({why(e)})"
    try:
        write_text(d / ERROR_FILE, line + "\n" + redo_hint(d) + "\n")
    except OSError:
        pass                                    # the disk refuses even that: the line says it
    return StorageError(e.errno, f"{line}; {redo_hint(d)}")


def write_pages(d: str | Path, blocks: list[Block], stem: str = "report",
                title: Optional[str] = None) -> tuple[Path, Path]:
    """``d``/STEM.md and ``d``/STEM.html from ``blocks``, each whole or not at all; on a failed
    write: report.error.txt and StorageError (module docstring). A report written whole clears
    an earlier report.error.txt."""
    d = Path(d)
    md, page = d / f"{stem}.md", d / f"{stem}.html"
    md_text, html_text = render_md(blocks), render_html(blocks, title=title)
    try:                                        # both or neither (analysis.atomic.write_all)
        write_all([(md, md_text.encode("utf-8")), (page, html_text.encode("utf-8"))])
    except OSError as e:
        raise failed(d, e) from None
    if stem == "report":
        try:
            (d / ERROR_FILE).unlink(missing_ok=True)
        except OSError:
            pass
    return md, page


def write_file(d: str | Path, name: str, data: bytes) -> Path:
    """One more file of a report (a figure), whole or not at all, like write_pages."""
    d = Path(d)
    try:
        return write_bytes(d / name, data)
    except OSError as e:
        raise failed(d, e) from None
