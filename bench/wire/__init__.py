"""Wire truth for a client's timestamps: what a packet capture on the loopback says happened.

    tcpdump -i lo -w FILE --time-stamp-precision=nano 'tcp port N'       (capture.py)
      ─► pcap.read_pcap: (ts_ns CLOCK_REALTIME, linktype, frame)   exact integer ns, own reader
      ─► pcap.tcp_connections: frames decoded with dpkt ─► per TCP connection, per direction, a byte
         stream whose every byte knows the capture time of the packet that made it readable
      ─► http.exchanges: HTTP/1.1 requests and responses in order on each connection (keep-alive,
         Content-Length or chunked bodies) ─► SSE events of each response, each stamped with the
         packet that brought its last byte (the earliest a client could have seen it)
      ─► compare.match: exchange ↔ loadgen record by the request id written in the prompt
         ("rq000123 ..."), never by time: the pcap's clock is not the records' clock
      ─► compare.errors: client-minus-wire TTFT and ITL (durations on each side's own clock)

Pure parts (pcap, http, compare) are tested in tests/bench/test_wire.py on synthetic captures;
capture.py and scenario.py drive tcpdump and ``loadgen run`` for ``python -m bench.timing_truth``; host.py
and report.py are that bench's CPU accounting and table.

Imports: the standard library, dpkt (pcap frames) and its own modules; ``loadgen run`` only as a subprocess.
"""
