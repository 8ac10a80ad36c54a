"""Messages of issue 18 item 9/7: kernel rows flag their own oddities, the sweep table never
truncates run names, `loadgen run --help` names the wire transport."""
from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from loadgen.commands.kernel import row_flags
from loadgen.commands.sweep import sweep_table


def _row(**kw):
    base = dict(transfer_ms=1.0, device_ms=0.5, bound_fraction=0.8, binding="memory")
    return SimpleNamespace(**{**base, **kw})


def test_kernel_rows_flag_transfer_below_device_and_far_past_the_bound():
    assert row_flags(_row()) == []
    assert row_flags(_row(transfer_ms=0.10, device_ms=8.10))[0].startswith("w/ transfer < device")
    assert row_flags(_row(bound_fraction=2.5)) == ["of bound > 200%: cache-resident, not a memory figure"]
    assert "spec's rate" in row_flags(_row(bound_fraction=2.5, binding="compute"))[0]


def test_sweep_table_keeps_whole_run_names_on_a_narrow_terminal():
    pts = [{"value": v, "requests_completed": 10, "requests_failed": 0, "request_throughput": 1.0,
            "output_throughput": 100.0, "goodput": 1.0, "ttft_p50_ms": 1.0, "ttft_p99_ms": 2.0,
            "tpot_p50_ms": 1.0, "tpot_p99_ms": 1.0, "valid": True, "run_dir": f"concurrency-{v}",
            "reused": False} for v in (1, 16)]
    buf = io.StringIO()
    Console(file=buf, width=70).print(sweep_table({"scenario": "s", "param": "load.concurrency",
                                                   "points": pts}))
    assert "concurrency-1 " in buf.getvalue() and "concurrency-16" in buf.getvalue()


def test_run_help_names_the_wire_transport(capsys):
    from loadgen.cli import main
    try:
        main(["run", "--help"])
    except SystemExit:
        pass
    out = " ".join(capsys.readouterr().out.split())
    assert "asyncio + aiohttp" not in out and "epoll" in out
