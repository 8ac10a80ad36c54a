"""servers.calib: an OpenAI-compatible server whose timing and faults are known — check a load
tester (loadgen, or your own harness) against numbers you chose.

    loadgen serve calib --ttft-ms 50 --itl-ms 10 [--lockstep] [--port P]   (= python -m servers.calib)
        serve.py   flags ─► app ─► listen ─► "PORT <n>" (stdout), ready line (stderr)
        app.py     routes: /v1/completions, /v1/chat/completions ─► handler.py; /v1/models,
                   /health, /calib/log, /calib/clock, /reset_prefix_cache
        handler.py request ─► settings (flags ◄ the body's ``calib`` object) ─► answer:
                   role chunk at arrival + role_ms, content chunk j at arrival + ttft_ms + j*itl_ms
                   (absolute deadlines), usage, [DONE]; each write logged [write_ns, n_tokens]
                   (perf_counter_ns: the client's clock on this host) ─► GET /calib/log
        chunks.py  the SSE bytes (completions and chat), cached per shape
        audio.py   POST /v1/audio/transcriptions: bounded multipart parse, the WAV's length, a
                   transcript streamed as OpenAI, vLLM or transformers serve do (``calib.format``)
        answers.py a streamed tool call or a JSON answer (``calib.answer``), valid or not
        solve.py   ``calib.answer`` solve | solve_wrong: arithmetic answered right or wrong
        lockstep.py with --lockstep: one DecodeClock per itl_ms writes the next chunk of every
                   running stream per tick (continuous batching) ─► GET /calib/clock
        faults.py  http500 | http429 | drop | malformed | bad_json | stall | error_event |
                   no_done | noise, after ``fault_at`` content chunks
        spans.py   --otlp-endpoint URL: one OTLP/JSON span per request carrying a traceparent, in
                   its trace, with known queue / prefill / TTFT (the truth: GET /calib/spans)
    process.py  CalibrationServer: the same in a subprocess, as a context manager (tests, bench/)

A request overrides the flags with ``{"calib": {...}}`` in its body. Keys:
  ttft_ms, itl_ms, role_ms   timing (role_ms: when the chat role-only chunk goes out)
  tokens                     output length (default: max_tokens, else 16)
  tokens_per_chunk           words per chunk; usage counts every word as a token
  text                       the text of one token (default " tok"; e.g. non-ASCII " ü")
  usage                      false: never send usage, even when asked for
  usage_tokens               report this completion_tokens in usage instead of the truth
  role_first                 chat: send a role-only chunk first (default true)
  reasoning_tokens           chat: the first N chunks carry ``reasoning_content``
  fault, fault_at, stall_s   see faults.py (fault_at: content chunks before the fault, default 2)
  rate_limit_first, retry_after   the first k attempts of a request (the same body bytes: a hash,
                             table bounded to 100,000 bodies) answered 429 with ``Retry-After:
                             <retry_after>`` (default "1"); the log entry says ``status: 429``;
                             the count is forgotten when the request is served (a rerun is
                             limited again) and by POST /calib/reset (a run that gave up)
  close_after                streams answer ``Keep-Alive: timeout=5, max=100`` and then: true: close
                             the socket after the stream (llama.cpp's llama-server); "next": keep it
                             open but drop the next request on it unanswered (a stale keep-alive)
  lockstep                   true: content chunks on the global decode clock; a request with a
                             fault keeps its own absolute deadlines
  answer                     "tool_call": chat streams a tool call (OpenAI delta form: id and name,
                             then the arguments in pieces); "json": the content is a JSON text
                             (answers.py); never on the lockstep clock
                             "solve" / "solve_wrong": the last "A + B" or "A * B" in the prompt
                             answered exactly / off by one, a character per token, cut to
                             max_tokens with finish_reason "length" (solve.py: accuracy tests)
  json, tool_name            the text carried (the arguments, or the content; default "{}"), valid
                             or not as you need; the function name (default: the body's named
                             tool_choice, else its first tool)
With ttft_ms = itl_ms = 0 and no fault the whole answer is written at once from cached bytes, so
the server is cheap enough for client capacity benchmarks.

Imports: aiohttp and the standard library only; never loadgen or analysis (tests/test_layering.py).
"""
from servers.calib.app import make_app
from servers.calib.chunks import MODEL
from servers.calib.handler import DEFAULTS
from servers.calib.process import CalibrationServer

__all__ = ["CalibrationServer", "DEFAULTS", "MODEL", "make_app"]
