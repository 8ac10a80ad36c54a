"""Context fit: does the workload's largest request fit the context the server states?

    /v1/models: the served model's max_model_len (vLLM, SGLang, the JAX server; also
    context_length, max_context_length) │ /info: max_model_len (the JAX server)
        ─► context_limit() ─► (limit, where it was read)         none stated ─► not checked
    /info tokenizer.kind "byte" (the JAX server's presets) ─► prompts counted in UTF-8 bytes
    WorkloadPlan ─► the requests the run will send (warm-up + num_requests of the seeded stream,
        at most MAX_LOOKED; sessions: each conversation's last turn, which carries the whole
        conversation) ─► prompt_tokens() each + its max_tokens
        largest prompt + 1 token > limit      ─► ProbeError "workload.prompt_tokens: ..."
        largest prompt + max_tokens > limit   ─► ProbeError "workload.output_tokens: ..."  (exit 2)

How a prompt is counted (rounded up where the unit is uncertain):
    the server says its tokenizer is byte-level  UTF-8 bytes (what it counts, exactly)
    workload.tokenizer: a tokenizer.json          its count (exact for that tokenizer)
    workload.tokenizer: bytes                     bytes (the count the workload was sized in)
    workload.tokenizer: words                     1 token per word for loadgen's synthetic text
                                                  (common English words: one BPE token each);
                                                  other text (files): the larger of 1 per word
                                                  and 1 per 4 UTF-8 bytes (prose: ~4 bytes/token)
    api.endpoint chat | responses                 + CHAT_TEMPLATE_TOKENS per message (role markers)
    api.endpoint embeddings                       each input on its own, nothing generated:
                                                  the largest input <= limit
"""
from __future__ import annotations

import copy
import itertools
import math
from typing import Iterator, Optional

from loadgen.scenario.tokens import WORDS
from loadgen.targets.probe import ProbeError

MAX_LOOKED = 2000            # requests (sessions: conversations) whose lengths are checked
CHAT_TEMPLATE_TOKENS = 32    # per message: what a chat template adds around it, generously
BYTES_PER_TOKEN = 4
LIMIT_KEYS = ("max_model_len", "context_length", "max_context_length")
_COMMON = frozenset(WORDS)


def context_limit(models: Optional[dict], model: Optional[str],
                  info: Optional[dict]) -> tuple[Optional[int], Optional[str]]:
    """The context length the server states for ``model``, and where it was read."""
    try:
        entries = [e for e in models["data"] if isinstance(e, dict)]
    except (TypeError, KeyError):
        entries = []
    for e in entries:
        if e.get("id") == model or len(entries) == 1:
            for k in LIMIT_KEYS:
                v = e.get(k)
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    return v, f"{k} of '{e.get('id')}' in /v1/models"
    for where in ((info or {}).get("server"), info):
        v = where.get("max_model_len") if isinstance(where, dict) else None
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v, "max_model_len in /info"
    return None, None


def byte_level(info: Optional[dict]) -> bool:
    """Whether the server's /info says its tokenizer counts bytes (the JAX server's presets)."""
    for where in ((info or {}).get("server"), info):
        tok = where.get("tokenizer") if isinstance(where, dict) else None
        if isinstance(tok, dict) and tok.get("kind") == "byte":
            return True
    return False


def prompt_tokens(text: str, counter, byte_server: bool) -> int:
    """One prompt in the server's tokens, by the rule in the module doc (no chat template)."""
    n_bytes = len(text.encode("utf-8", "surrogatepass"))   # files refuse lone surrogates at load
    if byte_server:
        return n_bytes
    n = counter.count(text)
    if counter.label == "words" and not _COMMON.issuperset(text.split()):
        return max(n, math.ceil(n_bytes / BYTES_PER_TOKEN))
    return n


def counting_rule(counter, byte_server: bool, chat: bool) -> str:
    if byte_server:
        rule = "UTF-8 bytes: the server's tokenizer is byte-level"
    elif counter.label == "words":
        rule = (f"words: 1 per common word, else the larger of 1 per word and 1 per "
                f"{BYTES_PER_TOKEN} bytes")
    elif counter.label == "bytes":
        rule = "bytes (workload.tokenizer)"
    else:
        rule = f"tokens of {counter.label} (workload.tokenizer)"
    return rule + (f", + {CHAT_TEMPLATE_TOKENS} per chat message" if chat else "")


def _requests(plan, load) -> Iterator[tuple[list[str], int, int]]:
    """(the prompt texts of one request, tokens of earlier answers in its prompt, its max_tokens)
    for the requests the run will send."""
    n = (load.warmup_requests + load.num_requests) if load.num_requests else MAX_LOOKED
    n = min(n, MAX_LOOKED)
    if plan.sessions is not None:      # the last turn carries the conversation so far
        for s in itertools.islice(iter(plan.sessions), n):
            yield ([t.user for t in s.turns], sum(t.max_tokens for t in s.turns[:-1]),
                   s.turns[-1].max_tokens)
        return
    if plan.trace is not None:         # a fresh copy: the plan's own tallies length errors
        from loadgen.scenario.trace import TracePrompts
        plan = copy.copy(plan)
        plan.trace = TracePrompts(plan.counter, plan.w.seed, plan.w.block_tokens)
        specs = itertools.chain(itertools.islice(plan.warmup_specs(), load.warmup_requests),
                                itertools.islice(iter(plan), n))
    else:
        specs = itertools.islice(iter(plan), n)
    for p in specs:
        if p.messages:
            yield ([str(m.get("content", "")) for m in p.messages if isinstance(m, dict)], 0,
                   p.max_tokens)
        else:
            yield (list(p.prompt) if isinstance(p.prompt, list) else [p.prompt]), 0, p.max_tokens


def check_context_fit(plan, load, endpoint: str, models: Optional[dict], model: Optional[str],
                      info: Optional[dict]) -> Optional[dict]:
    """ProbeError (one line naming the workload field and the limit) when the largest request
    cannot fit; else what was checked (meta.json probe.context), or None when the server states
    no context length."""
    limit, source = context_limit(models, model, info)
    if limit is None:
        return None
    byte_server, chat = byte_level(info), endpoint in ("chat", "responses")   # a chat template
    embeddings = endpoint == "embeddings"
    rule = counting_rule(plan.counter, byte_server, chat)
    big_prompt, worst = 0, (0, 0)          # largest prompt; (prompt, max_tokens) of the largest
    looked = 0
    for texts, answers, max_tokens in _requests(plan, load):
        looked += 1
        if embeddings:
            p, max_tokens = max(prompt_tokens(t, plan.counter, byte_server) for t in texts), 0
            big_prompt = max(big_prompt, p)
            worst = max(worst, (p, 0))
            continue
        p = answers + sum(prompt_tokens(t, plan.counter, byte_server) for t in texts)
        if chat:
            p += CHAT_TEMPLATE_TOKENS * (len(texts) + (len(texts) - 1 if answers else 0))
        big_prompt = max(big_prompt, p)
        if p + max_tokens > sum(worst):
            worst = (p, max_tokens)
    out = {"limit": limit, "source": source, "counted_as": rule, "requests_looked_at": looked,
           "largest_prompt": big_prompt, "largest_request": sum(worst)}
    where = f"the server's context of {limit:,} tokens ({source})"
    if embeddings and big_prompt > limit:
        raise ProbeError(f"workload.prompt_tokens: the largest input (~{big_prompt:,} tokens, "
                         f"counted as {rule}) does not fit {where}; send shorter inputs")
    if big_prompt + (0 if embeddings else 1) > limit:
        raise ProbeError(f"workload.prompt_tokens: the largest prompt (~{big_prompt:,} tokens, "
                         f"counted as {rule}) does not fit {where}; send shorter prompts")
    if sum(worst) > limit:
        raise ProbeError(f"workload.output_tokens: the largest request (prompt ~{worst[0]:,} + "
                         f"max_tokens {worst[1]:,} = {sum(worst):,} tokens, counted as {rule}) "
                         f"exceeds {where}; lower workload.output_tokens or "
                         "workload.prompt_tokens")
    return out
