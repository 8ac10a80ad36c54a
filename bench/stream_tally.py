"""Benchmark (not a test): CPU per streamed chunk of the stream step's parse, content vs tool calls.

    prebuilt vLLM-shaped SSE bytes (one chat chunk per event, 16 events per read) ─►
        tally:  StreamTally.add_bytes per event (msgspec typed decode + the count)
        step:   StreamStep.feed per read (SSE parse + add_bytes + Record.chunks) + end + finish
    for three streams: plain content deltas, content with usage on the last chunk, and
    ``delta.tool_calls`` deltas (a name, then the arguments split over the remaining chunks)

Per stream and path: the best of ``--repeat`` passes, in CPU ns per chunk (process time: a busy
shared host preempts the run, which wall time would count). Content figures are the
hot path every run pays; the tool-call figures say what a tool-calling stream costs on top.
Prints a table, then one JSON line. Wrap runs in ``flock /tmp/bench.lock`` on a shared host.

    python -m bench.stream_tally [--chunks 4096] [--repeat 15]
"""
from __future__ import annotations

import argparse
import json
import time

from loadgen.client.request import finish
from loadgen.client.sse import SSEParser, StreamTally
from loadgen.client.stream_step import StreamStep
from loadgen.record import Record

HEAD = '{"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1733000000,' \
       '"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":'
TAIL = ',"logprobs":null,"finish_reason":null}]}'
PER_READ = 16


def _content(n: int) -> list[bytes]:
    return [(HEAD + json.dumps({"content": f" tok{i % 97}"}) + TAIL).encode() for i in range(n)]


def _content_usage(n: int) -> list[bytes]:
    out = _content(n - 1)
    out.append(b'{"id":"x","object":"chat.completion.chunk","choices":[],'
               b'"usage":{"prompt_tokens":128,"completion_tokens":%d}}' % (n - 1))
    return out


def _tools(n: int) -> list[bytes]:
    first = {"tool_calls": [{"index": 0, "id": "chatcmpl-tool-1", "type": "function",
                             "function": {"name": "get_weather", "arguments": ""}}]}
    out = [(HEAD + json.dumps(first) + TAIL).encode()]
    for i in range(n - 1):
        d = {"tool_calls": [{"index": 0, "function": {"arguments": f'"k{i}": {i}, '}}]}
        out.append((HEAD + json.dumps(d) + TAIL).encode())
    return out


def _body(events: list[bytes]) -> list[bytes]:
    sse = [b"data: " + e + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]
    return [b"".join(sse[i:i + PER_READ]) for i in range(0, len(sse), PER_READ)]


def _tally_ns(events: list[bytes], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = StreamTally()
        add = t.add_bytes
        t0 = time.process_time_ns()
        for e in events:
            add(e)
        best = min(best, time.process_time_ns() - t0)
    return best / len(events)


def _step_ns(reads: list[bytes], n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        rec = Record(0, "measured", 0, requested_output_tokens=n)
        tally = StreamTally()
        t0 = time.process_time_ns()
        step = StreamStep(rec, tally)
        for i, r in enumerate(reads):
            step.feed(i, r)
        step.end(len(reads))
        finish(rec, tally, 1)
        best = min(best, time.process_time_ns() - t0)
        assert rec.status == "ok", rec.error
    return best / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args()
    assert SSEParser                       # the step's parser: imported for the doc's sake
    res = {}
    for name, make in (("content", _content), ("content+usage", _content_usage), ("tool_calls", _tools)):
        ev = make(a.chunks)
        res[name] = {"tally_ns_per_chunk": round(_tally_ns(ev, a.repeat), 1),
                     "step_ns_per_chunk": round(_step_ns(_body(ev), a.chunks, a.repeat), 1)}
    print(f"{'stream':<15}{'tally ns/chunk':>16}{'step ns/chunk':>16}")
    for name, r in res.items():
        print(f"{name:<15}{r['tally_ns_per_chunk']:>16}{r['step_ns_per_chunk']:>16}")
    print(json.dumps({"bench": "stream_tally", "chunks": a.chunks, "repeat": a.repeat, **res}))


if __name__ == "__main__":
    main()
