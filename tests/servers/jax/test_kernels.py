"""servers/jax/kernels: the FFI matmul equals XLA's dot; the model under --matmul ffi equals xla;
a build that cannot happen falls back to XLA with one log line; the server shows its choice."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import urllib.request

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from servers.jax import kernels
from servers.jax import model as M
from servers.jax.kernels import build as B
from servers.jax.kernels import dispatch as D
from servers.jax.presets import get_preset
from servers.jax.serve import MATMUL_MODES

from .conftest import REPO, start_server

TINY = get_preset("tiny")


@pytest.fixture
def ffi(kernel_dir, monkeypatch):
    monkeypatch.setenv("SERVERS_JAX_KERNEL_DIR", str(kernel_dir))
    info = kernels.configure("ffi")
    assert info["mode"] == "ffi", info["reason"]   # g++ and the headers are part of the dev setup
    yield info
    kernels.configure("xla")


def _ref(x, w):
    return np.asarray(x, np.float64) @ np.asarray(w, np.float64)


def _close(got, want, rtol=1e-5, atol=2e-6):
    """Equal up to fp32 rounding: atol is relative to the largest |value| (sums of K products)."""
    want = np.asarray(want)
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol * max(1.0, np.abs(want).max()))


def _has_ffi_call(fn, *args) -> bool:
    """Traced afresh (a new wrapper: JAX caches traces by function, and the mode is read at trace time)."""
    return "loadgen_matmul" in str(jax.make_jaxpr(lambda *a: fn(*a))(*args))


MS = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 48, 63, 64, 65, 70, 96]
# M = 1 reads W from 4 segments when N <= 4096 (K % 4 rows left over: 13, 37, 5, 129, 6), by
# 8 rows of 4096-float blocks above (4099: a 3-column block)
SHAPES = [(768, 2304), (3072, 768), (13, 29), (37, 8), (5, 7), (64, 63), (129, 385), (1, 9),
          (6, 4096), (7, 4099)]


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("k,n", SHAPES)
def test_ffi_equals_xla_dot_both_layouts(ffi, k, n):
    rng = np.random.default_rng(k * 1000 + n)
    nn, nt = jax.jit(D.ffi_nn), jax.jit(D.ffi_nt)
    w = jnp.asarray(rng.standard_normal((k, n), np.float32))
    e = jnp.asarray(rng.standard_normal((n, k), np.float32))
    for m in MS if k * n < 100_000 else [1, 2, 5, 16, 33, 70]:
        x = jnp.asarray(rng.standard_normal((m, k), np.float32))
        for got, xla, want in ((nn(x, w), x @ w, _ref(x, w)), (nt(x, e), x @ e.T, _ref(x, e.T))):
            assert got.shape == (m, n) and got.dtype == jnp.float32
            _close(got, want)
            _close(got, xla)


def test_dispatch_takes_ffi_only_for_2d_fp32_small_m(ffi):
    w, e = jnp.ones((16, 24)), jnp.ones((24, 16))
    assert _has_ffi_call(kernels.matmul, jnp.ones((4, 16)), w)
    assert _has_ffi_call(kernels.matmul_t, jnp.ones((4, 16)), e)
    assert not _has_ffi_call(kernels.matmul, jnp.ones((kernels.MAX_M + 1, 16)), w)      # prefill rows
    assert not _has_ffi_call(kernels.matmul, jnp.ones((4, 16), jnp.bfloat16), w.astype(jnp.bfloat16))
    assert not _has_ffi_call(kernels.matmul, jnp.ones((2, 4, 16)), w)
    shapes = kernels.describe()["shapes"]
    assert shapes["nn M=4 K=16 N=24"] == {"use": "ffi"} and shapes["nt M=4 K=16 N=24"] == {"use": "ffi"}


def test_xla_mode_is_plain_matmul():
    kernels.configure("xla")
    x, w = jnp.ones((4, 16)), jnp.ones((16, 24))
    assert not _has_ffi_call(kernels.matmul, x, w)
    assert kernels.describe()["mode"] == "xla" and kernels.describe()["shapes"] == {}
    with pytest.raises(ValueError, match="matmul mode"):
        kernels.configure("fast")
    assert MATMUL_MODES == kernels.MODES


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("tied", [False, True])
def test_forward_and_fused_decode_ffi_equal_xla(kernel_dir, monkeypatch, tied):
    monkeypatch.setenv("SERVERS_JAX_KERNEL_DIR", str(kernel_dir))
    args = TINY.replace(tied_embeddings=tied)
    p = M.init_params(args, "fp32", seed=3, std=0.2)
    toks = jnp.asarray(np.arange(1, 21) * 7 % args.vocab_size, jnp.int32)      # 20 tokens
    cache = M.init_cache(args, 4, 32, "fp32")
    dec_toks, dec_pos = jnp.array([5, 6, 7], jnp.int32), jnp.array([0, 3, 9], jnp.int32)
    chunk = (jnp.arange(16, dtype=jnp.int32), jnp.int32(3), jnp.int32(0))   # a fused 16-row piece

    def run():   # fresh jit wrappers: the mode is read when a function is traced
        ref = jax.jit(lambda p, t: M.forward_reference(p, args, t))(p, toks)
        step = jax.jit(lambda p, c, t, s, ch: M.decode(p, args, c, t, s, 32, chunk=ch))
        return ref, step(p, cache, dec_toks, dec_pos, chunk), step

    kernels.configure("xla")
    want_ref, want_step, _ = run()
    assert kernels.configure("ffi")["mode"] == "ffi"
    try:
        got_ref, got_step, step = run()
        assert _has_ffi_call(lambda p: M.decode(p, args, cache, dec_toks, dec_pos, 32, chunk=chunk), p)
        used = kernels.describe()["shapes"]
        assert ("nt M=3 K=256 N=512" in used) == tied and "nn M=19 K=256 N=512" in used   # 3 + 16 rows
    finally:
        kernels.configure("xla")
    # 4 layers of a different summation order, amplified by norms and softmax: fp32 noise ~1e-5
    _close(got_ref, want_ref, rtol=1e-4, atol=2e-5)
    for got, want in zip(jax.tree_util.tree_leaves(got_step), jax.tree_util.tree_leaves(want_step)):
        _close(got, want, rtol=1e-4, atol=2e-5)


def test_auto_times_each_shape_once_and_records_it(ffi):
    kernels.configure("auto")
    f = jax.jit(lambda x, w: kernels.matmul(x, w) * 2)
    x, w = jnp.full((3, 64), 0.5), jnp.full((64, 200), 0.25)
    _close(f(x, w), 2 * _ref(x, w))
    entry = kernels.describe()["shapes"]["nn M=3 K=64 N=200"]
    assert entry["use"] in ("ffi", "xla") and entry["xla_ms"] > 0 and entry["ffi_ms"] > 0
    assert entry["use"] == ("ffi" if entry["ffi_ms"] < entry["xla_ms"] * (1 - 0.03) else "xla")


def test_build_impossible_falls_back_to_xla_with_one_log_line(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SERVERS_JAX_CXX", str(tmp_path / "no-such-g++"))
    monkeypatch.setenv("SERVERS_JAX_KERNEL_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(B, "_loaded", {})            # as in a fresh process: nothing loaded yet
    with caplog.at_level(logging.WARNING, logger="servers.jax.kernels"):
        info = kernels.configure("ffi")
    assert info["mode"] == "xla" and info["requested"] == "ffi"
    assert "no-such-g++" in info["reason"] and "not found" in info["reason"]
    lines = [r.getMessage() for r in caplog.records if r.name == "servers.jax.kernels"]
    assert len(lines) == 1 and "using XLA's dot" in lines[0] and "no-such-g++" in lines[0]
    x, w = jnp.asarray(np.linspace(-1, 1, 40, dtype=np.float32).reshape(4, 10)), jnp.ones((10, 6))
    assert not _has_ffi_call(kernels.matmul, x, w)
    _close(jax.jit(kernels.matmul)(x, w), _ref(x, w))
    kernels.configure("xla")


def test_build_cli_reports_a_broken_compiler_in_one_line(tmp_path):
    env = {"SERVERS_JAX_CXX": str(tmp_path / "no-such-g++"), "SERVERS_JAX_KERNEL_DIR": str(tmp_path),
           "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-m", "servers.jax.kernels.build"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "no-such-g++" in r.stderr and "error:" in r.stderr


def _info_and_text(srv) -> tuple[dict, str]:
    with urllib.request.urlopen(srv.base_url + "/info", timeout=10) as r:
        info = json.loads(r.read())
    body = json.dumps({"model": "tiny", "prompt": "hello kernels", "max_tokens": 12, "temperature": 0}).encode()
    req = urllib.request.Request(srv.base_url + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return info, json.loads(r.read())["choices"][0]["text"]


@pytest.mark.slow   # three real servers, each with its warm-up
def test_server_matmul_flag_ffi_fallback_and_same_text(tmp_path, kernel_dir, jax_cache_dir, monkeypatch):
    monkeypatch.setenv("SERVERS_JAX_KERNEL_DIR", str(kernel_dir))
    out = {}
    for label, extra_env in (("xla", {}), ("ffi", {}), ("broken", {"SERVERS_JAX_CXX": "/nonexistent/g++",
                                                                    "SERVERS_JAX_KERNEL_DIR": str(tmp_path)})):
        for k, v in extra_env.items():
            monkeypatch.setenv(k, v)
        srv = start_server(tmp_path, ["--slots", "2", "--matmul", "xla" if label == "xla" else "ffi"],
                           jax_cache_dir)
        try:
            out[label] = (*_info_and_text(srv), srv.log())
        finally:
            srv.stop()
    assert out["xla"][0]["matmul"]["mode"] == "xla"
    ffi_info = out["ffi"][0]["matmul"]
    assert ffi_info["mode"] == "ffi" and ffi_info["shapes"]
    assert all(v["use"] == "ffi" for v in ffi_info["shapes"].values())
    broken = out["broken"][0]["matmul"]
    assert broken["mode"] == "xla" and "/nonexistent/g++" in broken["reason"]
    assert out["broken"][2].count("matmul ffi unavailable") == 1
    assert out["ffi"][1] == out["xla"][1] == out["broken"][1]      # greedy: the same text


def test_ffi_refuses_mismatched_shapes_in_both_layouts(ffi):
    """One handler template serves both layouts: each checks its own K and names its own layout."""
    x = jnp.ones((2, 8), jnp.float32)
    with pytest.raises(Exception, match=r"lg_matmul_nn: shapes do not match x\[M,K\] @ w\[K,N\]"):
        jax.block_until_ready(D.ffi_nn(x, jnp.ones((7, 4), jnp.float32)))
    with pytest.raises(Exception, match=r"lg_matmul_nt: shapes do not match x\[M,K\] @ e\[N,K\]\^T"):
        jax.block_until_ready(D.ffi_nt(x, jnp.ones((4, 7), jnp.float32)))
