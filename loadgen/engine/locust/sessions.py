"""Multi-turn sessions on a Locust worker: the gevent runtime of the one session driver
(loadgen.engine.core.sessions.SessionPlayer: which session next, each turn's time, the budget,
what a stop or a drain cancels). A Locust user plays one session at a time; this only waits
and sends, through the worker's one request path (RequestSource.send). No asyncio here."""
from __future__ import annotations

from loadgen.engine.locust.clock import sleep_until
from loadgen.record import now_ns
from loadgen.engine.core.sessions import SessionPlayer
from loadgen.scenario.session_turns import turn_headers
from loadgen.scenario.workload import PromptSpec


class SessionWork:
    """One worker's sessions; ``node`` is its RequestSource (records, the request path)."""

    def __init__(self, node, plan):
        self.node, self.plan, ids = node, plan, plan.slot_ids()
        self.p = SessionPlayer(ids, len(ids) if isinstance(ids, range) else None,
                               lambda: node.stopped, node.shift)

    def go(self, t0: int) -> None:
        plan, ld = self.plan, self.node.sc.load
        self.p.begin(t0, t0 + int(ld.duration_s * 1e9) if ld.duration_s else None,
                     plan.session_slice(), plan.schedule.offsets_ns is not None,
                     plan.session_count())

    def serve(self, user) -> bool:
        """Play one session on ``user``; False when there is none to play (now or ever)."""
        node, p = self.node, self.p
        if node.t0 is None or p.halted() or node.exhausted:
            return False
        if not p.server and now_ns() < node.t0:
            sleep_until(node.t0, p.halted)            # a closed loop starts at t0
            return True
        conv = p.take(not user.sessions_played, now_ns())
        node.exhausted = node.exhausted or p.exhausted
        if conv is not None:
            user.sessions_played += 1
            if not p.server or not sleep_until(conv.due, p.halted) and p.claim(conv):
                p.drive(p.play(conv), lambda due: sleep_until(due, p.halted),
                        lambda t: self._send(user, t))
            node.exhausted = node.exhausted or p.exhausted
            node.maybe_finish()
        return conv is not None

    def _send(self, user, t):
        rec, node = t.record(), self.node
        node.last_issue_ns = now_ns()
        node.send(user, rec, PromptSpec(t.turn.user, t.turn.user_tokens, t.turn.max_tokens),
                  messages=t.messages, want_text=True,
                  headers=turn_headers(node.sc.api.session_header, t.session_id))
        return rec

    def stop(self, why: str) -> None:
        for rec in self.p.stop(why):
            self.node.write(rec)
