"""Writes the two small synthetic traces shipped in scenarios/traces/ (seeded; nothing downloaded).

    mooncake-small.jsonl  Mooncake's format: 48 requests, Poisson arrivals at ~1/s, 4 "system
                          prompt" groups (1-3 shared 64-token blocks each, Zipf-popular), a few
                          multi-request conversations that extend their previous prompt's blocks,
                          then unique blocks; input 64-384 tokens, output 16-48
    chat-small.jsonl      the generic form: {timestamp, messages, max_tokens}, 24 requests

    python -m bench.make_traces        (rewrites both files; the same bytes every time)
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "scenarios" / "traces"
BLOCK = 64


def mooncake(rng: np.random.Generator, n: int = 48) -> list[dict]:
    t = np.concatenate(([0.0], np.cumsum(rng.exponential(1000.0, n - 1))))
    groups = [[1], [2, 3], [4, 5, 6], [7]]
    weights = 1.0 / np.arange(1, len(groups) + 1) ** 1.1
    weights /= weights.sum()
    next_id, rows, convo = 100, [], {}
    for i in range(n):
        g = int(rng.choice(len(groups), p=weights))
        ids = list(groups[g])
        if g in convo and rng.random() < 0.5:          # a follow-up: the previous prompt + more
            ids = list(convo[g])
        extra = int(rng.integers(1, 4))
        for _ in range(extra):
            ids.append(next_id)
            next_id += 1
        ids = ids[:6]
        convo[g] = ids
        length = (len(ids) - 1) * BLOCK + int(rng.integers(1, BLOCK + 1))
        rows.append({"timestamp": int(round(t[i])), "input_length": length,
                     "output_length": int(rng.integers(16, 49)), "hash_ids": ids})
    return rows


def chat(rng: np.random.Generator, n: int = 24) -> list[dict]:
    t = np.concatenate(([0.0], np.cumsum(rng.exponential(1500.0, n - 1))))
    topics = ["the weather", "a train timetable", "a recipe for bread", "the history of tea",
              "how a bicycle works", "the rules of chess"]
    rows = []
    for i in range(n):
        topic = topics[int(rng.integers(len(topics)))]
        msgs = [{"role": "system", "content": "You are a concise assistant."},
                {"role": "user", "content": f"Tell me about {topic}, briefly."}]
        rows.append({"timestamp": int(round(t[i])), "messages": msgs,
                     "max_tokens": int(rng.integers(16, 49))})
    return rows


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, rows in (("mooncake-small.jsonl", mooncake(np.random.default_rng(2026))),
                       ("chat-small.jsonl", chat(np.random.default_rng(2027)))):
        (OUT / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"{OUT / name}: {len(rows)} rows")


if __name__ == "__main__":
    main()
