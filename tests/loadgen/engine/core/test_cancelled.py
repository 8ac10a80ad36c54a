"""loadgen/engine/core/cancelled.py: a cancelled record's line from a template is exactly the line
the Record itself encodes (redacted), for every field that varies, and a session turn too."""
from dataclasses import dataclass
from typing import Optional

import pytest

from loadgen import redact as redact_mod
from loadgen.engine.aio.planned import Unbuilt
from loadgen.engine.core import cancelled
from loadgen.engine.core.merge import Owed


@dataclass
class Spec:                                   # what a RequestSpec gives a cancelled record
    id: int
    phase: str = "measured"
    scheduled_at_ns: Optional[int] = None
    max_tokens: Optional[int] = None
    prompt_tokens: Optional[int] = None


ITEMS = [Unbuilt(0), Unbuilt(7, scheduled_at_ns=123_456_789_012), Spec(3, "warmup", None, 16, 8),
         Owed(9, "measured", 5, 32, 4, sent_at_ns=6), Owed(10, "measured", why="its own reason"),
         Owed(11, "measured", 1, session_id="s-1", turn=2), Spec(12, "measured", 2**62, 0, 0)]


@pytest.mark.parametrize("worker,end_ns", [(None, 42), ("3", None)])
def test_template_lines_are_the_records_own_lines(worker, end_ns):
    lines = cancelled.Lines(worker, end_ns)
    for why in ("run interrupted", 'a "quoted" reason \\ with ünïcode'):
        for item in ITEMS:
            want = redact_mod.redact(cancelled.record(item, why, worker, end_ns).to_json())
            assert lines.line(item, why) == want


def test_a_secret_in_the_reason_is_masked(monkeypatch):
    monkeypatch.setattr(redact_mod, "_secrets", redact_mod._secrets)     # restored after
    redact_mod.register("sk-this-is-a-secret-key-0123")
    line = cancelled.Lines("0", 1).line(Unbuilt(1), "failed with sk-this-is-a-secret-key-0123")
    assert "sk-this-is-a-secret" not in line and redact_mod.MASK in line
