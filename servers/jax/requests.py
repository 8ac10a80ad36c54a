"""What the HTTP layer hands the orchestrator (servers.jax.orchestrator) and what it is refused with.

    GenRequest(request_id, prompt_ids, SamplingParams, on_token)  a completion; on_token runs on the
                                                                  engine thread (the callback contract:
                                                                  servers/jax/orchestrator.py)
    EmbedRequest(request_id, inputs, on_done)                     /v1/embeddings
    QueueFull (the API answers 503), RequestTooLong (400)
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional


OnToken = Callable[[Optional[int], Optional[str]], None]


class QueueFull(Exception):
    """The waiting queue holds ``max_queue`` requests; the API answers 503."""


class RequestTooLong(ValueError):
    """The prompt does not fit the context (len(prompt_ids) >= max_model_len); the API answers 400."""


@dataclass
class SamplingParams:
    max_tokens: int
    temperature: float = 0.0          # 0 → greedy
    top_p: float = 1.0
    seed: Optional[int] = None        # None → derived from the request counter (not reproducible)
    ignore_eos: bool = False


@dataclass
class GenRequest:
    request_id: str
    prompt_ids: list[int]
    params: SamplingParams
    on_token: OnToken
    submitted_ns: int = field(default_factory=time.perf_counter_ns)
    admitted_ns: Optional[int] = None   # left the waiting queue for a slot (queue time ends here)
    cached_tokens: int = 0              # prompt tokens served from the prefix cache (set at admission)


OnEmbedded = Callable[[Optional[list], Optional[str]], None]


@dataclass
class EmbedRequest:
    """/v1/embeddings: token ids of each input; ``on_done(vectors, None)`` once every input is
    embedded (float32 [dim] each, in input order) or ``on_done(None, "abort")``; engine thread."""
    request_id: str
    inputs: list[list[int]]
    on_done: OnEmbedded
    submitted_ns: int = field(default_factory=time.perf_counter_ns)
    vectors: list = field(default_factory=list)
    job: Any = None                   # engine EmbedJob of the input in progress
