"""transformers serve's /v1/audio/transcriptions with a Whisper-shaped random model made here, recorded.

    make_whisper()  (run by the transformers venv's python: torch + transformers live there)
        byte-level BPE vocab: the 256 GPT-2 byte symbols, no merges, + Whisper's special tokens
        (<|endoftext|> <|startoftranscript|> <|en|> <|translate|> <|transcribe|> <|startoflm|>
        <|startofprev|> <|nocaptions|> <|notimestamps|>) ─► vocab.json, merges.txt ─► WhisperTokenizer
        WhisperFeatureExtractor(80 mel bins, 16 kHz) ─► WhisperProcessor
        WhisperConfig: 2+2 layers, d_model 64, 2 heads, ffn 128 (~0.34M parameters), torch seed 0
        generation_config: max_new_tokens = min_new_tokens = 16 (a fixed answer length), every
        token but printable ASCII, space and <|endoftext|> suppressed (a random model otherwise
        emits special tokens, which decode to "", or bytes that are not UTF-8, which the server's
        streamer holds back)          ─► <cache>/models/whisper-tiny/
    start: transformers serve <that dir> --device cpu --dtype float32 (needs python-multipart,
        soundfile and soxr in its venv: pip install python-multipart soundfile soxr)
    cases (a 1 s WAV clip from loadgen.scenario.audio.probe_clip; the multipart body is loadgen's
    own, loadgen/client/multipart.py):
        transcriptions                  stream false ─► {"text": ...}
        transcriptions-stream           stream true  ─► data: <text> per token, no end marker
        transcriptions-stream-loadgen   + stream_include_usage (vLLM's field) ─► HTTP 422
    ─► tests/fixtures/servers/transformers/<case>.json (bench/compat/record.py's format; the
       request ``body`` is the form's text fields, ``file`` described, not stored) and the
       ``variants.audio`` entry of transformers/_server.json

    --measure: ``loadgen run scenarios/audio.yaml`` against it instead (stream c1, stream c4,
    whole c4; 12 requests, 2 warm-up; runs under <cache>/matrix-runs/) ─► one markdown table row
    per run (docs/compatibility.md "Audio transcriptions") and the load average around them

Run: ``python -m bench.compat.audio [--force] [--measure]``
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.compat import record, servers, wire
from bench.compat.paths import REPO, cache_dir
from loadgen.client import multipart
from loadgen.scenario.audio import probe_clip

RECIPE = "whisper-tiny-v1"
TOKENS = 16
PATH = "/v1/audio/transcriptions"
CASES = {"transcriptions": {"stream": False},
         "transcriptions-stream": {"stream": True},
         "transcriptions-stream-loadgen": {"stream": True, "stream_include_usage": True}}

MAKE = r'''
import json, sys, torch
from pathlib import Path
from transformers import (WhisperConfig, WhisperForConditionalGeneration, WhisperFeatureExtractor,
                          WhisperTokenizer, WhisperProcessor, GenerationConfig)
out, n_tok = Path(sys.argv[1]), int(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): i for i, c in enumerate(cs)}
specials = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>",
            "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]
for s in specials:
    vocab[s] = len(vocab)
(out / "vocab.json").write_text(json.dumps(vocab))
(out / "merges.txt").write_text("#version: 0.2\n")
V = len(vocab)
eot, sot = vocab["<|endoftext|>"], vocab["<|startoftranscript|>"]
tok = WhisperTokenizer(str(out / "vocab.json"), str(out / "merges.txt"), unk_token="<|endoftext|>",
                       bos_token="<|endoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>")
tok.add_special_tokens({"additional_special_tokens": specials[1:]})
proc = WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80, sampling_rate=16000),
                        tokenizer=tok)
cfg = WhisperConfig(vocab_size=V, num_mel_bins=80, encoder_layers=2, decoder_layers=2,
                    encoder_attention_heads=2, decoder_attention_heads=2, d_model=64,
                    encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=1500,
                    max_target_positions=448, pad_token_id=eot, bos_token_id=eot, eos_token_id=eot,
                    decoder_start_token_id=sot, begin_suppress_tokens=None, suppress_tokens=None)
torch.manual_seed(0)
model = WhisperForConditionalGeneration(cfg)
keep = set(range(94)) | {vocab[chr(256 + 32)], eot}            # printable ASCII, space, end
model.generation_config = GenerationConfig(
    decoder_start_token_id=sot, eos_token_id=eot, pad_token_id=eot, bos_token_id=eot,
    max_new_tokens=n_tok, min_new_tokens=n_tok, no_timestamps_token_id=vocab["<|notimestamps|>"],
    lang_to_id={"<|en|>": vocab["<|en|>"]},
    task_to_id={"transcribe": vocab["<|transcribe|>"], "translate": vocab["<|translate|>"]},
    is_multilingual=False, forced_decoder_ids=None, begin_suppress_tokens=None,
    suppress_tokens=[i for i in range(V) if i not in keep])
model.save_pretrained(out)
proc.save_pretrained(out)
print(V, sum(p.numel() for p in model.parameters()))
'''


def whisper_dir() -> Path:
    return cache_dir() / "models" / "whisper-tiny"


def venv() -> Path:
    return cache_dir() / "transformers" / "venv" / "bin"


def make_whisper(force: bool = False) -> Path:
    d = whisper_dir()
    stamp = d / "loadgen.recipe"
    if not force and stamp.is_file() and stamp.read_text() == RECIPE:
        return d
    subprocess.run([str(venv() / "python"), "-c", MAKE, str(d), str(TOKENS)], check=True,
                   timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    stamp.write_text(RECIPE)
    return d


def start(d: Path) -> tuple[subprocess.Popen, int, list, float]:
    port = servers.free_port()
    argv = [str(venv() / "transformers"), "serve", str(d), "--host", "127.0.0.1", "--port",
            str(port), "--device", "cpu", "--dtype", "float32", "--log-level", "info"]
    log = open(cache_dir() / "logs" / "transformers-audio.log", "w")
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    while time.monotonic() - t0 < 180:
        if p.poll() is not None:
            raise RuntimeError(f"transformers serve exited with {p.returncode} (see {log.name})")
        if servers.http(f"http://127.0.0.1:{port}/health", timeout=2)[0] == 200:
            return p, port, argv, round(time.monotonic() - t0, 1)
        time.sleep(0.5)
    stop(p)
    raise RuntimeError("transformers serve not healthy within 180 s")


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)


def record_case(port: int, model: str, version: str, name: str) -> dict:
    clip = probe_clip()
    fields = {"model": model, "response_format": "json", **CASES[name]}
    bodies = multipart.ClipBodies(fields)
    headers = {"Content-Type": bodies.content_type}
    if fields["stream"]:
        headers["Accept"] = "text/event-stream"
    conn = wire.Conn(port)
    try:
        ex = conn.exchange("POST", PATH, bodies.body(clip), headers)
        closing = conn.after_body(1.0) if ex.error is None else {"closed_by_server": None}
    finally:
        conn.close()
    described = {**fields, "file": {"format": clip.format, "bytes": len(clip.data),
                                    "seconds": clip.seconds}}
    return {"server": "transformers", "version": version, "case": name, "variant": "audio",
            "request": {"method": "POST", "path": PATH,
                        # sent as multipart/form-data (a random boundary); stored as
                        # its text fields, the file described (the replay reads either)
                        "headers": {k: v for k, v in headers.items() if k != "Content-Type"},
                        "body": described},
            "response": record._response(ex), "connection": closing, "error": ex.error}


RUNS = (("whisper-stream-c1", True, 1), ("whisper-stream-c4", True, 4),
        ("whisper-nostream-c4", False, 4))


def _fmt(v) -> str:
    return "—" if v is None else f"{v:.1f}"


def measure(port: int, version: str) -> list[str]:
    """The three runs through the loadgen CLI; one table row each."""
    rows = []
    for name, stream, conc in RUNS:
        sets = [f"target.url=http://127.0.0.1:{port}", f"api.stream={str(stream).lower()}",
                f"load.concurrency={conc}", "load.num_requests=12", "load.warmup_requests=2",
                f"output.dir={cache_dir() / 'matrix-runs'}",
                f"output.run_name={name}-{time.strftime('%Y%m%d-%H%M%S')}",
                "api.ready_timeout_s=0"]
        r = subprocess.run([sys.executable, "-m", "loadgen", "run", str(REPO / "scenarios"
                            / "audio.yaml"), "--json", *[x for s in sets for x in ("--set", s)]],
                           capture_output=True, text=True, timeout=900, cwd=REPO)
        s = json.loads(r.stdout)["summary"] if r.returncode == 0 else None
        if s is None:
            rows.append(f"| transformers | {version} | {name} | FAIL (exit {r.returncode}) "
                        f"| {r.stderr.strip()[-200:]} |")
            continue
        a = s["audio"]
        rows.append(f"| transformers | {version} | {name} | "
                    f"{'PASS' if not s['requests_failed'] else 'FAIL'} | {s['requests_failed']} "
                    f"| dropped: {', '.join(s['dropped_fields']) or 'none'} "
                    f"| {_fmt(s['ttft_ms']['p50'])} | {_fmt(s['e2el_ms']['p50'])} "
                    f"| {_fmt(s['output_throughput'])} | {_fmt(a['rtfx'])} "
                    f"| {_fmt((a['rtfx_per_request'] or {}).get('p50'))} |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="remake the model")
    ap.add_argument("--measure", action="store_true", help="loadgen runs, not transcripts")
    a = ap.parse_args(argv)
    d = make_whisper(a.force)
    version = servers.install.check_transformers(cache_dir() / "transformers")
    if a.measure:
        p, port, args, startup = start(d)
        try:
            load = [os.getloadavg()[0]]
            rows = measure(port, version)
            load.append(os.getloadavg()[0])
        finally:
            stop(p)
        print(f"start-up {startup} s; load average {load[0]:.1f} -> {load[1]:.1f}")
        print("\n".join(rows))
        return 0
    out = record.OUT / "transformers"
    p, port, args, startup = start(d)
    try:
        record_case(port, str(d), version, "transcriptions")   # loads the model: a warm-up
        for name in CASES:
            t0 = time.monotonic()
            record._write(out, name, record_case(port, str(d), version, name), t0)
    finally:
        stop(p)
    meta_path = out / "_server.json"
    meta = json.loads(meta_path.read_text())
    meta.setdefault("variants", {})["audio"] = {
        "argv": record._home(args), "model": d.name, "startup_s": startup, "version": version,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cases": list(CASES)}
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
