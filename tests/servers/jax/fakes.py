"""A hand-written fake orchestrator for the API tests: same contract as servers.jax.orchestrator, no model.

Rule (computable by hand): for a request whose last prompt id is L, the k-th generated token (k = 0, 1, ...)
is ``ord('a') + (L + k + 1) % 26``. With the real ByteTokenizer that is a run of consecutive lowercase letters.
If ``eos_after`` is set, a request ends with on_token(None, "stop") after that many tokens (unless ignore_eos,
then the EOS id is delivered like a token). One step every ``step_s`` seconds on its own thread; ``slots``
requests run at once, at most ``max_queue`` wait; cancel() aborts at the next step; QueueFull when full.
"""
from __future__ import annotations

import collections
import threading
import time

from servers.jax.requests import GenRequest, QueueFull


def fake_token(last_prompt_id: int, k: int) -> int:
    return ord("a") + (last_prompt_id + k + 1) % 26


def fake_text(prompt_ids: list[int], n: int) -> str:
    return "".join(chr(fake_token(prompt_ids[-1], k)) for k in range(n))


class FakeOrchestrator:
    def __init__(self, slots: int = 2, max_queue: int = 4, max_model_len: int = 128, step_s: float = 0.002,
                 eos_id: int = 257, eos_after: int | None = None) -> None:
        self.slots, self.max_queue, self.max_model_len, self.step_s = slots, max_queue, max_model_len, step_s
        self.eos_id, self.eos_after = eos_id, eos_after
        self.error: BaseException | None = None
        self._cv = threading.Condition()
        self._waiting: collections.deque[GenRequest] = collections.deque()
        self._running: dict[str, list] = {}  # request_id -> [req, n_generated]
        self._cancels: set[str] = set()
        self._stop = False
        self._thread: threading.Thread | None = None
        self.submitted: list[GenRequest] = []
        self.cancelled: list[str] = []
        self.delivered = 0  # tokens handed to on_token, all requests

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="fake-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(5)

    def submit(self, req: GenRequest) -> None:
        with self._cv:
            if len(self._waiting) >= self.max_queue:
                raise QueueFull(f"waiting queue is full ({self.max_queue} requests)")
            self._waiting.append(req)
            self.submitted.append(req)
            self._cv.notify_all()

    def cancel(self, request_id: str) -> None:
        with self._cv:
            self.cancelled.append(request_id)
            self._cancels.add(request_id)
            self._cv.notify_all()

    def stats(self) -> dict:
        with self._cv:
            used = sum(len(r.prompt_ids) + n for r, n in self._running.values())
            return {"running": len(self._running), "waiting": len(self._waiting), "slots": self.slots,
                    "kv_cache_usage": used / (self.slots * self.max_model_len)}

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not (self._stop or self._waiting or self._running or self._cancels):
                    self._cv.wait()
                if self._stop:
                    return
                cancels, self._cancels = self._cancels, set()
                dropped = [r for r in self._waiting if r.request_id in cancels]
                self._waiting = collections.deque(r for r in self._waiting if r.request_id not in cancels)
                dropped += [self._running.pop(i)[0] for i in list(self._running) if i in cancels]
                while self._waiting and len(self._running) < self.slots:
                    r = self._waiting.popleft()
                    r.admitted_ns = time.perf_counter_ns()      # as the orchestrator stamps it
                    self._running[r.request_id] = [r, 0]
                work = list(self._running.items())
            for r in dropped:
                r.on_token(None, "abort")
            time.sleep(self.step_s)
            for rid, entry in work:
                req, k = entry
                p = req.params
                if self.eos_after is not None and k == self.eos_after and not p.ignore_eos:
                    self._end(rid, req, None, "stop")
                    continue
                tok = self.eos_id if self.eos_after is not None and k == self.eos_after else \
                    fake_token(req.prompt_ids[-1], k)
                entry[1] = k + 1
                self.delivered += 1
                if k + 1 >= p.max_tokens:
                    self._end(rid, req, tok, "length")
                else:
                    req.on_token(tok, None)

    def _end(self, rid: str, req: GenRequest, tok: int | None, reason: str) -> None:
        with self._cv:
            self._running.pop(rid, None)
        req.on_token(tok, reason)
