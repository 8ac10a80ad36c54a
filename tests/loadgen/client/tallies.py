"""Chunks through both of StreamTally's decoders: the typed one (``add_bytes``, loadgen/client/chunk.py)
and the generic parse (``add``); and a record finished from raw chunks (``finished``: the stream
step's end as request.end_stream and request.finish do it, grading included)."""
from __future__ import annotations

import json

from loadgen.client import chunk
from loadgen.client.request import end_stream, finish
from loadgen.client.sse import StreamTally
from loadgen.record import Record


def tally_both_ways(chunks: list[dict], continuous: bool) -> tuple[StreamTally, StreamTally]:
    """(typed, generic) tallies of ``chunks``; asserts each chunk decodes typed and that both
    decoders count it the same."""
    typed, generic = StreamTally(continuous, True), StreamTally(continuous, True)
    for c in chunks:
        raw = json.dumps(c).encode()
        assert chunk.decode(raw) is not None
        assert typed.add_bytes(raw) == generic.add(c)
    return typed, generic


def finished(chunks: list[bytes], expected) -> tuple[Record, StreamTally]:
    """A measured record (8 tokens asked, 9 prompt tokens) whose stream was ``chunks`` (raw JSON
    events, stamped 1000, 1001, ...), ended at 2000 and finished; ``expected``: the answer graded."""
    rec, tally = Record(id=0, phase="measured", requested_output_tokens=8), \
        StreamTally(False, False, None, expected)
    rec.sent_at_ns = 100
    for k, data in enumerate(chunks):
        rec.chunks.append((1000 + k, tally.add_bytes(data)))
    end_stream(rec, tally, True, 2000)
    finish(rec, tally, 9)
    return rec, tally
