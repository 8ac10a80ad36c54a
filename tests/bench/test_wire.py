"""bench.wire on synthetic captures: pcap → TCP streams → HTTP exchanges → SSE events → errors.

Every capture here is built packet by packet with dpkt at chosen nanosecond times, so each expected
time is known exactly; no test measures anything. The last test checks the calibration server's
lockstep mode by structure (which decode step wrote which chunk), never by time.
"""
import asyncio
import json
from decimal import Decimal
from pathlib import Path

import pytest

dpkt = pytest.importorskip("dpkt")

from bench.wire import compare, http, pcap  # noqa: E402
from bench.wire.scenario import scenario, write_prompts  # noqa: E402

PORT = 8000
T0 = 1_700_000_000_000_000_000          # ns, CLOCK_REALTIME-like


class Wire:
    """One client↔server TCP conversation written as a pcap (Ethernet/IPv4 on lo)."""

    def __init__(self, cport: int = 40000, seq_c: int = 1000, seq_s: int = 5000):
        self.cport, self.seq = cport, {"c": seq_c, "s": seq_s}
        self.frames: list = []

    def _frame(self, t_ns: int, who: str, flags: int, payload: bytes = b"", seq=None) -> None:
        sport, dport = (self.cport, PORT) if who == "c" else (PORT, self.cport)
        tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=self.seq[who] if seq is None else seq,
                           flags=flags, data=payload)
        ip = dpkt.ip.IP(src=b"\x7f\x00\x00\x01", dst=b"\x7f\x00\x00\x01", p=dpkt.ip.IP_PROTO_TCP,
                        data=tcp)
        ip.len = len(bytes(ip))
        eth = dpkt.ethernet.Ethernet(src=b"\0" * 6, dst=b"\0" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
        self.frames.append((t_ns, bytes(eth)))

    def handshake(self, t_ns: int) -> "Wire":
        self._frame(t_ns, "c", dpkt.tcp.TH_SYN)
        self.seq["c"] += 1
        self._frame(t_ns + 10, "s", dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK)
        self.seq["s"] += 1
        self._frame(t_ns + 20, "c", dpkt.tcp.TH_ACK)
        return self

    def send(self, t_ns: int, who: str, payload: bytes) -> int:
        """Append ``payload`` in order; returns its sequence number (for retransmissions)."""
        seq = self.seq[who]
        self._frame(t_ns, who, dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, payload)
        self.seq[who] += len(payload)
        return seq

    def raw(self, t_ns: int, who: str, seq: int, payload: bytes) -> None:
        self._frame(t_ns, who, dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, payload, seq=seq)


def write_pcap(path: Path, *wires: Wire, nano: bool = True) -> Path:
    frames = sorted((f for w in wires for f in w.frames), key=lambda f: f[0])
    with open(path, "wb") as fh:
        w = dpkt.pcap.Writer(fh, snaplen=262144, nano=nano)
        for t, fr in frames:
            w.writepkt(fr, ts=Decimal(t) / Decimal(10**9))
    return path


def request(i: int, extra: str = "") -> bytes:
    body = json.dumps({"model": "m", "prompt": f"{compare.tag(i)} say something{extra}",
                       "max_tokens": 3, "stream": True}).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)) + body


RESP_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")


def cmpl_event(text: str, usage: bool = False) -> bytes:
    o = {"choices": [{"index": 0, "text": text, "finish_reason": None}]}
    if usage:
        o = {"choices": [], "usage": {"completion_tokens": 3}}
    return b"data: " + json.dumps(o).encode() + b"\n\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def test_read_pcap_gives_exact_ns_for_nano_and_micro_files(tmp_path):
    w = Wire().handshake(T0 + 123_456_789)
    ns = [t for t, _, _ in pcap.read_pcap(write_pcap(tmp_path / "n.pcap", w))]
    assert ns == [T0 + 123_456_789, T0 + 123_456_799, T0 + 123_456_809]
    w2 = Wire().handshake(T0 + 123_456_000)
    us = [t for t, lt, _ in pcap.read_pcap(write_pcap(tmp_path / "u.pcap", w2, nano=False))]
    assert us == [T0 + 123_456_000] * 3                  # µs file: 10 ns apart rounds to the same µs


def test_one_streamed_exchange_event_times_follow_the_packets(tmp_path):
    w = Wire().handshake(T0)
    rq = request(7)
    w.send(T0 + 1_000, "c", rq[:40])                     # request split across two packets
    w.send(T0 + 1_500, "c", rq[40:])
    w.send(T0 + 2_000, "s", RESP_HEAD)
    w.send(T0 + 50_000_000, "s", chunk(cmpl_event(" a")))                  # token 1
    w.send(T0 + 60_000_000, "s", chunk(cmpl_event(" b")))                  # token 2
    ev3 = chunk(cmpl_event(" c"))
    w.send(T0 + 70_000_000, "s", ev3[:25])                                 # token 3, split:
    w.send(T0 + 70_400_000, "s", ev3[25:] + chunk(cmpl_event("", usage=True)))  # ends here
    w.send(T0 + 71_000_000, "s", chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    exs = http.exchanges(pcap.tcp_connections(write_pcap(tmp_path / "a.pcap", w), PORT))
    assert len(exs) == 1
    ex = exs[0]
    assert (ex.method, ex.path, ex.status, ex.complete) == ("POST", "/v1/completions", 200, True)
    assert ex.request_first_ns == T0 + 1_000 and ex.request_last_ns == T0 + 1_500
    assert compare.TAG_RE.search(ex.request_body).group(1) == b"000007"
    assert [(e.kind, e.t_ns - T0, e.n) for e in ex.events] == [
        ("token", 50_000_000, 1), ("token", 60_000_000, 1), ("token", 70_400_000, 1),
        ("other", 70_400_000, 0), ("done", 71_000_000, 0)]
    assert ex.first_token_ns == T0 + 50_000_000


def test_keep_alive_exchanges_pair_in_order_and_chat_deltas_count(tmp_path):
    w = Wire().handshake(T0)
    w.send(T0 + 100, "c", request(1))
    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    tok = b'data: {"choices":[{"index":0,"delta":{"content":" hi"}}]}\n\n'
    w.send(T0 + 200, "s", RESP_HEAD + chunk(role))
    w.send(T0 + 300, "s", chunk(tok) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    w.send(T0 + 1_000, "c", request(2))
    body = tok + b"data: [DONE]\n\n"                     # Content-Length framing, CRLF-free SSE
    w.send(T0 + 1_100, "s", b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                            b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
    w.send(T0 + 1_200, "s", body[10:])
    exs = http.exchanges(pcap.tcp_connections(write_pcap(tmp_path / "k.pcap", w), PORT))
    assert [(e.index, compare.TAG_RE.search(e.request_body).group(1)) for e in exs] == [
        (0, b"000001"), (1, b"000002")]
    assert [(e.kind, e.t_ns - T0) for e in exs[0].events] == [("other", 200), ("token", 300), ("done", 300)]
    assert [(e.kind, e.t_ns - T0) for e in exs[1].events] == [("token", 1_200), ("done", 1_200)]
    assert all(e.complete for e in exs)


def test_crlf_events_end_at_the_blank_lines_first_byte(tmp_path):
    w = Wire().handshake(T0)
    w.send(T0 + 100, "c", request(3))
    ev = b'data: {"choices":[{"text":" x"}]}\r\n\r'       # the blank line's CR arrives first ...
    w.send(T0 + 200, "s", b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          b"Content-Length: %d\r\n\r\n" % (len(ev) + 1) + ev)
    w.send(T0 + 900, "s", b"\n")                          # ... its LF later: the event was whole at 200
    (ex,) = http.exchanges(pcap.tcp_connections(write_pcap(tmp_path / "c.pcap", w), PORT))
    assert [(e.kind, e.t_ns - T0) for e in ex.events] == [("token", 200)]


def test_reordered_and_retransmitted_segments_keep_readable_times(tmp_path):
    w = Wire().handshake(T0)
    w.send(T0 + 100, "c", request(4))
    w.send(T0 + 200, "s", RESP_HEAD)
    e1, e2 = chunk(cmpl_event(" a")), chunk(cmpl_event(" b"))
    s1 = w.seq["s"]
    w.seq["s"] += len(e1)
    w.send(T0 + 300, "s", e2)                             # arrives before the hole is filled
    w.raw(T0 + 500, "s", s1, e1)                          # hole filled: both readable at 500
    w.raw(T0 + 700, "s", s1, e1)                          # a retransmission: first copy kept
    w.send(T0 + 800, "s", chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    conns = pcap.tcp_connections(write_pcap(tmp_path / "r.pcap", w), PORT)
    assert conns[0].down.retransmitted_bytes == len(e1) and conns[0].down.holes == 0
    (ex,) = http.exchanges(conns)
    assert [(e.kind, e.t_ns - T0) for e in ex.token_events] == [("token", 500), ("token", 500)]


def test_port_reuse_starts_a_new_connection_and_other_ports_are_ignored(tmp_path):
    a = Wire(cport=40001).handshake(T0)
    a.send(T0 + 100, "c", request(5))
    a.send(T0 + 200, "s", RESP_HEAD + chunk(cmpl_event(" a")) + b"0\r\n\r\n")
    b = Wire(cport=40001, seq_c=90_000).handshake(T0 + 1_000)
    b.send(T0 + 1_100, "c", request(6))
    other = Wire(cport=40002)
    other._frame(T0 + 50, "c", dpkt.tcp.TH_SYN)
    conns = pcap.tcp_connections(write_pcap(tmp_path / "p.pcap", a, b), PORT)
    assert len(conns) == 2 and [c.syn_ns - T0 for c in conns] == [0, 1_000]
    exs = http.exchanges(conns)
    assert [(e.conn, e.status, e.complete) for e in exs] == [(0, 200, True), (1, None, False)]
    assert pcap.tcp_connections(write_pcap(tmp_path / "o.pcap", other), 9999) == []


def record(i, sent, first, toks, phase="measured", status="ok"):
    chunks = [[t, 1] for t in toks]
    return {"id": i, "phase": phase, "status": status, "sent_at_ns": sent, "first_token_at_ns": first,
            "chunks": [[sent + 10, 0]] + chunks}


def test_match_and_errors_use_durations_on_each_clock(tmp_path):
    w = Wire().handshake(T0)
    w.send(T0 + 1_000_000, "c", request(10))
    w.send(T0 + 1_100_000, "s", RESP_HEAD)
    for j, t in enumerate((51_000_000, 61_000_000, 71_000_000)):
        w.send(T0 + t, "s", chunk(cmpl_event(f" t{j}")))
    w.send(T0 + 72_000_000, "s", chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    w.send(T0 + 80_000_000, "c", request(11))           # a warm-up id and an untagged request
    exs = http.exchanges(pcap.tcp_connections(write_pcap(tmp_path / "m.pcap", w), PORT))
    mono = 5_000_000_000                                   # the client's clock: any origin
    # client: sent 0.5 ms before the wire saw it, tokens stamped 2, 1 and 3 ms after the wire
    sent = mono
    toks = [mono + 500_000 + 50_000_000 + 2_000_000, mono + 500_000 + 60_000_000 + 1_000_000,
            mono + 500_000 + 70_000_000 + 3_000_000]
    recs = [record(10, sent, toks[0], toks), record(11, mono, None, [], phase="warmup"),
            record(12, mono, None, [], status="error")]
    m = compare.match(exs, recs)
    assert len(m["pairs"]) == 1 and m["records_not_ok"] == 1 and m["records_without_wire"] == 0
    offset = T0 + 1_000_000 - (mono + 500_000)            # REALTIME − MONOTONIC for this story
    e = compare.errors(m["pairs"], offset_ns=offset)
    assert e["ttft_client_ms"]["mean"] == pytest.approx(52.5)
    assert e["ttft_wire_ms"]["mean"] == pytest.approx(50.0)
    assert e["ttft_err_ms"]["mean"] == pytest.approx(2.5)
    assert e["itl_client_ms"]["n"] == 2 and e["itl_client_ms"]["mean"] == pytest.approx(10.5)  # 9, 12
    assert e["itl_wire_ms"]["mean"] == pytest.approx(10.0)
    assert sorted(compare.per_token_itl([(0, 1), (9_000_000, 1), (21_000_000, 2)])) == [6.0, 6.0, 9.0]
    assert [round(g, 6) for g in sorted([e["itl_gap_err_ms"]["max"], e["itl_gap_err_ms"]["p50"]])] \
        == [-1.0, 2.0]
    sp = e["split_estimate"]
    assert sp["send_lag_ms"]["mean"] == pytest.approx(0.5)
    assert sp["recv_lag_first_token_ms"]["mean"] == pytest.approx(2.0)
    assert sp["recv_lag_all_chunks_ms"]["max"] == pytest.approx(3.0)


def test_scenario_prompts_carry_the_record_ids(tmp_path):
    p = write_prompts(tmp_path / "p.jsonl", 3)
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    assert [compare.TAG_RE.search(r["prompt"].encode()).group(1) for r in rows] == \
        [b"000000", b"000001", b"000002"]
    lock = scenario("n", "http://127.0.0.1:1", p, 32, 96, 32, 128, tmp_path, "r")
    stag = scenario("n", "http://127.0.0.1:1", p, 32, 96, 32, 128, tmp_path, "r", staggered=True,
                    request_s=1.28)
    assert lock["load"]["mode"] == "concurrency" and lock["load"]["concurrency"] == 32
    assert stag["load"] == {"num_requests": 96, "warmup_requests": 32, "mode": "server",
                            "arrival": "constant", "rate": 25.0, "max_concurrency": 32}
    try:                                                    # valid for loadgen as written
        from loadgen.scenario.loader import scenario_from_dict
    except ImportError:                                     # pragma: no cover - a later layout
        from loadgen.scenario import scenario_from_dict
    scenario_from_dict(lock), scenario_from_dict(stag)


async def test_lockstep_server_writes_every_running_stream_in_each_decode_step():
    aiohttp = pytest.importorskip("aiohttp")
    from servers.calib import CalibrationServer

    async def one(s, url, i):
        body = {"model": "calib-model", "prompt": f"{compare.tag(i)} x", "max_tokens": 6,
                "stream": True, "stream_options": {"include_usage": True}}
        async with s.post(url + "/v1/completions", json=body) as r:
            return (await r.read()).count(b'"text":" tok"')

    with CalibrationServer(ttft_ms=5, itl_ms=5, lockstep=True) as srv:
        async with aiohttp.ClientSession() as s:
            assert await asyncio.gather(*(one(s, srv.url, i) for i in range(3))) == [6, 6, 6]
        log, (clock,) = srv.log(), srv.clock()
    ticks = clock["ticks"]
    assert [t[0] for t in ticks] == sorted({t[0] for t in ticks})            # grid ticks, increasing
    assert all(planned == clock["epoch_ns"] + k * clock["itl_ns"] for k, planned, *_ in ticks)
    assert sum(t[4] for t in ticks) == 3 * 6                                 # one chunk per stream per step

    def step_of(t_ns):
        return next(i for i, (_, _, a, b, _) in enumerate(ticks) if a <= t_ns <= b)
    for e in log:
        steps = [step_of(t) for t, n in e["chunks"] if n > 0]
        assert len(steps) == 6 and steps == list(range(steps[0], steps[0] + 6))  # consecutive steps
