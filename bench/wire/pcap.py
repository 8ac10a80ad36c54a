"""pcap ─► per-connection TCP byte streams whose bytes carry the capture time that delivered them.

    read_pcap(path)          ─► (ts_ns, linktype, frame) per record; classic pcap, µs or ns magic,
                                either byte order; ts_ns an exact int (dpkt's reader gives floats
                                or Decimals)
    tcp_connections(path, port) ─► [Connection(client, server, up: HalfStream, down: HalfStream)]
        frames decoded with dpkt (Ethernet as tcpdump writes lo, Linux cooked v1/v2, raw IP);
        up = client → server (the side whose destination port is ``port``), down = the answers.
        A SYN on a 4-tuple already seen starts a new Connection (port reuse).
    HalfStream: bytes in sequence order; ``time_at(offset)`` = the capture time of the packet that
        made byte ``offset`` readable (in order: its own packet; after a hole: the packet that
        filled the hole). Retransmitted and overlapping bytes keep their first delivery.
"""
from __future__ import annotations

import bisect
import socket
import struct
from dataclasses import dataclass, field
from typing import Iterator, Optional

import dpkt

DLT_NULL, DLT_EN10MB, DLT_RAW, DLT_LOOP, DLT_LINUX_SLL, DLT_LINUX_SLL2 = 0, 1, 101, 108, 113, 276
_MAGICS = {0xa1b2c3d4: 1000, 0xa1b23c4d: 1}     # multiplier to ns: µs or ns timestamps
_TCP_SYN, _TCP_ACK, _TCP_FIN, _TCP_RST = 0x02, 0x10, 0x01, 0x04


def read_pcap(path) -> Iterator[tuple[int, int, bytes]]:
    """Every record of a classic pcap file as ``(ts_ns, linktype, frame)``."""
    with open(path, "rb") as f:
        gh = f.read(24)
        if len(gh) < 24:
            return
        for endian in ("<", ">"):
            magic = struct.unpack(endian + "I", gh[:4])[0]
            if magic in _MAGICS:
                break
        else:
            raise ValueError(f"{path}: not a classic pcap file (magic {gh[:4].hex()}); "
                             "pcapng is not read here")
        mult = _MAGICS[magic]
        linktype = struct.unpack(endian + "I", gh[20:24])[0] & 0x0FFFFFFF
        rec = struct.Struct(endian + "IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, _orig = rec.unpack(h)
            frame = f.read(incl)
            if len(frame) < incl:
                return                       # a capture cut mid-record (killed tcpdump)
            yield sec * 1_000_000_000 + frac * mult, linktype, frame


def _ip_of(linktype: int, frame: bytes):
    """The IPv4/IPv6 packet (dpkt object) in a frame, or None."""
    try:
        if linktype == DLT_EN10MB:
            ip = dpkt.ethernet.Ethernet(frame).data
        elif linktype == DLT_LINUX_SLL:
            ip = dpkt.sll.SLL(frame).data
        elif linktype == DLT_LINUX_SLL2:
            ip = dpkt.sll2.SLL2(frame).data
        elif linktype in (DLT_NULL, DLT_LOOP):
            ip = dpkt.loopback.Loopback(frame).data
        elif linktype == DLT_RAW:
            ip = dpkt.ip6.IP6(frame) if frame and frame[0] >> 4 == 6 else dpkt.ip.IP(frame)
        else:
            raise ValueError(f"unsupported pcap link type {linktype}")
    except (dpkt.UnpackError, IndexError):
        return None
    return ip if isinstance(ip, (dpkt.ip.IP, dpkt.ip6.IP6)) else None


def _addr(ip) -> tuple[str, str]:
    fam = socket.AF_INET6 if isinstance(ip, dpkt.ip6.IP6) else socket.AF_INET
    return socket.inet_ntop(fam, ip.src), socket.inet_ntop(fam, ip.dst)


class HalfStream:
    """One direction of one TCP connection, reassembled."""

    def __init__(self) -> None:
        self.base: Optional[int] = None         # sequence number of byte 0
        self.data = bytearray()
        self._offs: list[int] = []              # start offset of each delivered run of bytes
        self._times: list[int] = []             # ... and the capture time that delivered it
        self._ooo: dict[int, bytes] = {}        # offset -> payload, beyond a hole
        self.packets = 0                        # segments with payload
        self.retransmitted_bytes = 0
        self.first_ns: Optional[int] = None     # first payload packet
        self.fin = False

    def syn(self, seq: int) -> None:
        self.base = (seq + 1) & 0xFFFFFFFF

    def add(self, seq: int, payload: bytes, ts_ns: int) -> None:
        if not payload:
            return
        if self.base is None:                   # capture started mid-connection
            self.base = seq
        self.packets += 1
        if self.first_ns is None:
            self.first_ns = ts_ns
        off = (seq - self.base) & 0xFFFFFFFF
        if off >= 0x80000000:                   # before byte 0: an old retransmission
            return
        have = len(self.data)
        if off > have:
            self._ooo.setdefault(off, payload)
            return
        if off + len(payload) <= have:
            self.retransmitted_bytes += len(payload)
            return
        self._deliver(payload[have - off:], ts_ns)
        while self._ooo:                         # a hole filled: what waited is readable now
            ready = [o for o in self._ooo if o <= len(self.data)]
            if not ready:
                break
            for o in sorted(ready):
                p = self._ooo.pop(o)
                have = len(self.data)
                if o + len(p) > have:
                    self._deliver(p[have - o:], ts_ns)

    def _deliver(self, piece: bytes, ts_ns: int) -> None:
        self._offs.append(len(self.data))
        self._times.append(ts_ns)
        self.data += piece

    def time_at(self, offset: int) -> int:
        """Capture time (ns, the pcap's clock) at which byte ``offset`` became readable."""
        if not 0 <= offset < len(self.data):
            raise IndexError(f"offset {offset} outside the stream (0..{len(self.data) - 1})")
        return self._times[bisect.bisect_right(self._offs, offset) - 1]

    @property
    def holes(self) -> int:
        """Payload still waiting behind a gap at the end (lost in the capture)."""
        return len(self._ooo)


@dataclass
class Connection:
    client: tuple                               # (address, port)
    server: tuple
    syn_ns: Optional[int] = None
    up: HalfStream = field(default_factory=HalfStream)      # client -> server
    down: HalfStream = field(default_factory=HalfStream)    # server -> client
    rst: bool = False


def tcp_connections(path, port: int) -> list[Connection]:
    """The TCP connections to ``port`` in a pcap, in order of first appearance."""
    conns: list[Connection] = []
    live: dict[tuple, Connection] = {}
    for ts, lt, frame in read_pcap(path):
        ip = _ip_of(lt, frame)
        if ip is None or not isinstance(ip.data, dpkt.tcp.TCP):
            continue
        tcp = ip.data
        if port not in (tcp.sport, tcp.dport):
            continue
        src, dst = _addr(ip)
        to_server = tcp.dport == port
        key = (src, tcp.sport, dst, tcp.dport) if to_server else (dst, tcp.dport, src, tcp.sport)
        flags = tcp.flags
        c = live.get(key)
        if to_server and flags & _TCP_SYN and not flags & _TCP_ACK:
            if c is None or c.up.base is not None and (c.up.data or c.down.data or c.rst):
                c = Connection(client=(key[0], key[1]), server=(key[2], key[3]), syn_ns=ts)
                conns.append(c)
                live[key] = c
            c.up.syn(tcp.seq)
            continue
        if c is None:
            c = Connection(client=(key[0], key[1]), server=(key[2], key[3]))
            conns.append(c)
            live[key] = c
        half = c.up if to_server else c.down
        if flags & _TCP_SYN:                     # SYN-ACK from the server
            half.syn(tcp.seq)
            continue
        if flags & _TCP_RST:
            c.rst = True
        half.add(tcp.seq, bytes(tcp.data), ts)
        if flags & _TCP_FIN:
            half.fin = True
    return conns
