"""What a tally keeps of one answer, bounded: the text pieces and tool calls it holds for the
record (``output_text``), the structured checks and the grade. Pure.

    Budget()            MAX_KEPT_CHARS characters per request, shared by everything kept
    KeptText(budget)    a list of text pieces; ``append`` keeps a piece while it fits the budget,
                        past it drops the piece and marks ``budget.cut``
    budget.take(n)      charge n (a new tool call costs CALL_COST): False (and ``cut``) when it
                        does not fit

``sse.StreamTally`` and ``responses.ResponsesTally`` keep their text and tool-call argument
pieces in KeptText lists on one Budget (``tally.kept``), so an endless answer (a hostile server,
max_tokens 10^6) holds at most ~MAX_KEPT_CHARS characters (plus CALL_COST per call) whatever it
streams; ``structured.fill`` does not check a cut answer (it says so). The per-chunk stamps have
their own cap (stream_step.MAX_CHUNK_STAMPS). docs/limits.md lists both.
"""
from __future__ import annotations

from typing import Optional

MAX_KEPT_CHARS = 4 * 2**20       # characters of answer text + tool-call arguments per request
CALL_COST = 64                   # what one tool call's entry is charged


class Budget:
    """The characters a tally may still keep; ``cut``: something was dropped."""

    __slots__ = ("left", "cut")

    def __init__(self, chars: Optional[int] = None):
        self.left, self.cut = (MAX_KEPT_CHARS if chars is None else chars), False

    def __eq__(self, other) -> bool:             # two tallies that kept the same: equal
        return isinstance(other, Budget) and (self.left, self.cut) == (other.left, other.cut)

    __hash__ = None

    def take(self, n: int) -> bool:
        if n <= self.left:
            self.left -= n
            return True
        self.cut = True
        return False


class KeptText(list):
    """Text pieces kept within a Budget (module doc); ``"".join`` reads it as any list."""

    __slots__ = ("budget",)

    def __init__(self, budget: Budget, pieces=()):
        super().__init__(pieces)
        self.budget = budget

    def append(self, piece) -> None:
        if self.budget.take(len(piece)):
            list.append(self, piece)
