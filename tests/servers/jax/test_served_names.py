"""servers.jax --served-model-name a,b: several model ids over the same weights. In-process over the
FakeOrchestrator (api.py), then one real server driven by loadgen's api.models (slow: a compile)."""
from __future__ import annotations

import collections
import json

import pytest
from aiohttp.test_utils import TestClient, TestServer

from servers.jax.api import create_app
from servers.jax.tokenizer import ByteTokenizer
from tests.servers.jax.fakes import FakeOrchestrator, fake_text

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores

TOK = ByteTokenizer(258)


@pytest.fixture
async def two_names():
    orch = FakeOrchestrator()
    orch.start()
    app = create_app(orch, TOK, {"preset": "fake"}, model_name="tiny-a,tiny-b",
                     max_model_len=orch.max_model_len, ready=True)
    client = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    yield client
    await client.close()
    orch.stop()


async def test_each_name_listed_and_served_unknown_404(two_names):
    client = two_names
    cards = (await (await client.get("/v1/models")).json())["data"]
    assert [c["id"] for c in cards] == ["tiny-a", "tiny-b"]
    assert {c["root"] for c in cards} == {"tiny-a"} and {c["max_model_len"] for c in cards} == {128}
    texts = []
    for name in ("tiny-a", "tiny-b"):
        r = await client.post("/v1/completions", json={"model": name, "prompt": "hi", "max_tokens": 4})
        assert r.status == 200
        body = await r.json()
        assert body["model"] == name                      # the name asked for, echoed
        texts.append(body["choices"][0]["text"])
    assert texts[0] == texts[1] == fake_text(TOK.encode("hi"), 4)      # same weights
    r = await client.post("/v1/chat/completions", json={
        "model": "tiny-b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert r.status == 200 and (await r.json())["model"] == "tiny-b"
    r = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 1})
    assert r.status == 200 and (await r.json())["model"] == "tiny-a"   # no model: the first
    for path, body in (("/v1/completions", {"model": "tiny-c", "prompt": "hi", "max_tokens": 1}),
                       ("/v1/chat/completions", {"model": "tiny", "max_tokens": 1,
                                                 "messages": [{"role": "user", "content": "x"}]})):
        r = await client.post(path, json=body)
        err = (await r.json())["error"]
        assert r.status == 404 and err["code"] == "model_not_found" and err["param"] == "model", err


@pytest.mark.slow            # its own server's warm-up (a JAX compile of the tiny preset)
def test_loadgen_api_models_against_two_names(tmp_path_factory, jax_cache_dir, tmp_path, capsys):
    """api.models over both names, round robin: every record names its model, the server echoed
    it, summary.json "models" has both; a name the server does not list stops the run at the
    probe (one line, exit 2)."""
    import yaml

    from loadgen.cli import main as cli_main
    from tests.loadgen.run.jax_e2e import run_scenario_cli
    from tests.servers.jax.server_proc import start_server
    srv = start_server(tmp_path_factory.mktemp("jax-names"),
                       ["--slots", "2", "--seed", "0", "--served-model-name", "tiny-a,tiny-b"],
                       jax_cache_dir)
    try:
        sc = {"name": "names-e2e", "target": {"url": srv.base_url},
              "api": {"endpoint": "completions", "model_assignment": "round_robin",
                      "models": [{"name": "tiny-a", "weight": 1}, {"name": "tiny-b", "weight": 1}]},
              "workload": {"tokenizer": "bytes", "seed": 1,
                           "prompt_tokens": {"dist": "fixed", "value": 16},
                           "output_tokens": {"dist": "fixed", "value": 4}},
              "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 8}}
        d, recs = run_scenario_cli(tmp_path, sc, "names")
        assert all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
        assert collections.Counter(r["model"] for r in recs) == {"tiny-a": 4, "tiny-b": 4}
        s = json.loads((d / "summary.json").read_text())
        assert set(s["models"]) == {"tiny-a", "tiny-b"}
        assert all(m["completed"] == 4 and m["share"] == pytest.approx(0.5)
                   for m in s["models"].values())
        bad = dict(sc, api=dict(sc["api"], models=[{"name": "tiny-a", "weight": 1},
                                                   {"name": "tiny-z", "weight": 1}]))
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump({**bad, "output": {"dir": str(tmp_path / "bad")}}))
        capsys.readouterr()
        assert cli_main(["run", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "tiny-z" in err[0] and "Traceback" not in err[0], err
    finally:
        srv.stop()
