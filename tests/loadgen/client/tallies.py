"""Chunks through both of StreamTally's decoders: the typed one (``add_bytes``, loadgen/client/chunk.py)
and the generic parse (``add``)."""
from __future__ import annotations

import json

from loadgen.client import chunk
from loadgen.client.sse import StreamTally


def tally_both_ways(chunks: list[dict], continuous: bool) -> tuple[StreamTally, StreamTally]:
    """(typed, generic) tallies of ``chunks``; asserts each chunk decodes typed and that both
    decoders count it the same."""
    typed, generic = StreamTally(continuous, True), StreamTally(continuous, True)
    for c in chunks:
        raw = json.dumps(c).encode()
        assert chunk.decode(raw) is not None
        assert typed.add_bytes(raw) == generic.add(c)
    return typed, generic
