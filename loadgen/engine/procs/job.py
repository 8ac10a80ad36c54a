"""What the parent hands a sender process on its stdin.

    parent ─► Job (pickled, length-prefixed) ─► child: it builds its own slice of the plan
              (engine.core.plan.Plan(sc, index, n)) from the scenario, as a Locust worker does
    parent ─► "go T0\\n" | "stop REASON\\n" lines on the same stdin (EOF: the parent is gone)
    child  ─► procs/progress.K.bin (engine.core.counters), records.K.jsonl, result.K.json
"""
from __future__ import annotations

import os
import pickle
import struct
from dataclasses import dataclass

_LEN = struct.Struct("<Q")


@dataclass
class Job:
    """Sender ``index`` of ``n``: everything it needs but the API key's value (read from its
    inherited environment) and its requests (its slice of the scenario's one seeded plan)."""
    index: int
    n: int
    sc: object                          # the Scenario
    base_url: str
    model: str
    drop_fields: tuple
    dir: str                            # the run's procs/

    def path(self, name: str, ext: str) -> str:
        """procs/NAME.K.EXT: records (jsonl), progress (bin), result (json), client (log)."""
        return os.path.join(self.dir, f"{name}.{self.index}.{ext}")

    def to_bytes(self) -> bytes:
        blob = pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)
        return _LEN.pack(len(blob)) + blob


def _read_exactly(fd: int, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        part = os.read(fd, min(size - len(out), 1 << 20))
        if not part:
            raise EOFError("job cut short on stdin (the parent went away)")
        out += part
    return bytes(out)


def read_job(fd: int) -> Job:
    """The Job from file descriptor ``fd`` (unbuffered: the parent's later lines stay there)."""
    (size,) = _LEN.unpack(_read_exactly(fd, _LEN.size))
    return pickle.loads(_read_exactly(fd, size))
