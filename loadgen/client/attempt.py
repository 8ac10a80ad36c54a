"""THE attempt loop of one request, sans I/O: every engine's driver only sends and sleeps.

Add a per-request feature — the places it touches now (hang-up, load.cancel, as the example):
    1. its scenario field: loadgen/scenario/ (hangups.py: ``load.cancel``) and docs/<feature>.md
    2. its rule, pure, one module: loadgen/client/<rule>.py (hangup.py: which request, when;
       retry.py: api.retry's waits) — built once per run where the engines build theirs:
       http_client.ClientConfig (cfg.cancel / cfg.retry, set by run/runner.py and
       engine/procs/child.py) and engine/locust/request_source.RequestSource.__init__
    3. THIS module, when it changes an attempt: one step of ``AttemptLoop.play`` (SEND / WAIT /
       DONE) or one line of ``settle`` / ``cancelled``; the two drivers (http_client.Client.
       execute: asyncio; request_source.RequestSource.send: gevent) follow the steps unchanged
    4. the record: its field in analysis/contract/record.py (Record) and, when a fresh or a
       cancelled record carries it, ``new_record`` / ``cancelled_record`` below (the only two
       places a Record is built; the reader decodes, never builds)
    5. the wire, only when it acts inside an exchange: stream_step.py (a per-token rule) or the
       drivers' deadline timers (client/wire/, client/gevent_wire/, aiohttp_transport.py; one
       connection policy is issue #37 step 3), request.Shape for a body or header rule
    6. its summary block (analysis/metrics/, analysis/report/) and analysis/contract/summary

    AttemptLoop(rec, retry, hangup)     retry: client.retry.RetryPolicy | None (api.retry);
                                        hangup: client.hangup.Hangup | None (load.cancel, this
                                        request's; HangupRule.of(id, phase))
      play()  a generator; the driver does what each step says and sends back ``now_ns()``:
          (SEND, Hangup | None)  send one attempt with this hang-up (its deadline counts from
                                 the FIRST send from the second attempt on: retry.Attempts)
          (WAIT, seconds)        sleep (asyncio.sleep / gevent.sleep), cancelled like a request
                                 in flight; then the hang-up may be due (the record ``aborted``)
          (DONE, None)           the request is over: ``settle``
      settle(rec)          attempts into the record (attempts, attempt_log, the first send)
      cancelled(rec, why)  interrupted (a task cancelled): the record ``cancelled`` with what was
                           measured so far (a complete answer stays ``ok``), end now when unset
    new_record(...)        the Record a request fills (every engine, every sender)
    cancelled_record(...)  the Record of a request that never ended (engine/core/cancelled.py,
                           sessions' unsent turns, the ledger's stand-in)
    INTERRUPTED            the one wording of an interrupted request's error

Pure: no asyncio, no gevent, no socket; the clock is the driver's (``now`` sent back). The
accuracy grading (client/accuracy.py) stays the driver's: off the loop, on a thread.
"""
from __future__ import annotations

from typing import Iterator, Optional

from loadgen.client.hangup import Hangup
from loadgen.client.retry import Attempts, RetryPolicy
from loadgen.record import Record, now_ns

SEND, WAIT, DONE = "send", "wait", "done"
INTERRUPTED = "the run was interrupted before the request ended"
_DONE = (DONE, None)


def new_record(id, phase: str, scheduled_at_ns: Optional[int], max_tokens: Optional[int],
               prompt_tokens: Optional[int], session_id: Optional[str] = None,
               turn: Optional[int] = None) -> Record:
    """The Record one request fills, before its send."""
    return Record(id=id, phase=phase, scheduled_at_ns=scheduled_at_ns,
                  requested_output_tokens=max_tokens, workload_prompt_tokens=prompt_tokens,
                  session_id=session_id, turn=turn)


def cancelled_record(id, phase: str, scheduled_at_ns: Optional[int], end_at_ns: Optional[int],
                     why: str, max_tokens: Optional[int] = None,
                     prompt_tokens: Optional[int] = None, sent_at_ns: Optional[int] = None,
                     worker: Optional[str] = None, session_id: Optional[str] = None,
                     turn: Optional[int] = None) -> Record:
    """The Record of a request that never ended (never sent, or given up by its sender)."""
    return Record(id=id, phase=phase, scheduled_at_ns=scheduled_at_ns, sent_at_ns=sent_at_ns,
                  end_at_ns=end_at_ns, status="cancelled", error_kind="cancelled", error=why,
                  requested_output_tokens=max_tokens, workload_prompt_tokens=prompt_tokens,
                  worker=worker, session_id=session_id, turn=turn)


class AttemptLoop:
    """One request's attempts (module doc). Per request: one object, one generator."""

    __slots__ = ("att", "hangup")

    def __init__(self, rec: Record, retry: Optional[RetryPolicy], hangup: Optional[Hangup]):
        self.hangup = hangup
        self.att: Optional[Attempts] = (Attempts(retry, rec, hangup) if retry is not None
                                        else None)

    def play(self, rec: Record) -> Iterator[tuple]:
        att = self.att
        if att is None:                          # no api.retry: one attempt
            yield SEND, self.hangup
            yield _DONE
            return
        while True:
            now = yield SEND, att.hangup
            wait = att.after(rec, now)           # the attempt is over: log it, wait or stand
            if wait is None:
                break
            now = yield WAIT, wait
            if not att.again(rec, now):          # load.cancel came in the wait: aborted
                break
        yield _DONE

    def settle(self, rec: Record) -> None:
        """The request is over: its attempts into ``rec``."""
        if self.att is not None:
            self.att.close(rec)
        elif rec.sent_at_ns is not None:
            rec.attempts = 1

    def close(self, rec: Record) -> None:
        """api.retry's attempts so far into ``rec`` (a copy of a record still in flight may be
        closed while its driver waits: the attempts are read, never changed)."""
        if self.att is not None:
            self.att.close(rec)

    def cancelled(self, rec: Record, why: str = INTERRUPTED) -> None:
        """The driver's task was cancelled (run interrupted): ``rec`` settled ``cancelled``."""
        self.close(rec)
        if rec.status != "ok":                   # complete before the interrupt: stays ok
            rec.status, rec.error_kind, rec.error = "cancelled", "cancelled", why
        if rec.end_at_ns is None:
            rec.end_at_ns = now_ns()
