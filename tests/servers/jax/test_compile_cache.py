"""Where the JAX server keeps compiled programs (servers/jax: compile_cache_dir): $SERVERS_JAX_CACHE_DIR,
else JAX's own $JAX_COMPILATION_CACHE_DIR (never overridden), else ~/.cache/loadgen/jax-compile; and the
test session's servers use the session's directory, never the user's home."""
import json
import urllib.request
from pathlib import Path

import pytest

from servers.jax import compile_cache_dir

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores

HOME_DEFAULT = str(Path.home() / ".cache" / "loadgen" / "jax-compile")


@pytest.mark.parametrize("ours, jaxs, want", [
    (None, None, HOME_DEFAULT),
    (None, "/tmp/jax-own", "/tmp/jax-own"),                  # JAX's variable is honoured, not replaced
    ("/tmp/ours", "/tmp/jax-own", "/tmp/ours"),              # ours names the server's choice first
    ("off", "/tmp/jax-own", None),                           # off: no persistent cache at all
    ("", None, None),
    (None, "  ", HOME_DEFAULT),                              # blank is unset
])
def test_cache_dir_choice(monkeypatch, ours, jaxs, want):
    for var, value in (("SERVERS_JAX_CACHE_DIR", ours), ("JAX_COMPILATION_CACHE_DIR", jaxs)):
        if value is None:
            monkeypatch.delenv(var, raising=False)
        else:
            monkeypatch.setenv(var, value)
    assert compile_cache_dir() == want


def test_the_session_has_its_own_caches_outside_home(jax_cache_dir):
    home = Path.home() / ".cache" / "loadgen"
    assert jax_cache_dir.is_dir() and home not in jax_cache_dir.resolve().parents
    assert compile_cache_dir() == str(jax_cache_dir)
    from servers.jax.kernels.build import cache_dir as kernel_dir
    assert home not in kernel_dir().resolve().parents


def test_the_shared_server_compiles_into_the_session_cache(jax_server, jax_cache_dir):
    with urllib.request.urlopen(jax_server.base_url + "/info", timeout=10) as r:
        info = json.loads(r.read())
    assert info["compile_cache_dir"] == str(jax_cache_dir)
    assert any(jax_cache_dir.iterdir())                      # its warm-up wrote programs there
