"""One fact, one wording (issue #38): the ``small`` preset's size as README.md and
scenarios/server.yaml state it is its real parameter count; a hidden secret is written as one
word, ``[REDACTED]`` (loadgen.redact.MASK), in every file loadgen writes and every doc."""
from __future__ import annotations

import re
from pathlib import Path

from loadgen.redact import MASK
from loadgen.run.rundir import resolved_yaml
from loadgen.scenario.loader import scenario_from_dict
from loadgen.targets.server_record import redact_argv, redact_env
from servers.jax.presets import PRESETS
from servers.vllm.describe import describe_server

ROOT = Path(__file__).resolve().parents[1]
SIZE = re.compile(r"~(\d+)M-parameter")


def test_the_small_preset_size_is_its_real_count_in_readme_and_scenario():
    millions = round(PRESETS["small"].n_params() / 1e6)            # 124,668,672 -> 125
    for f in ("README.md", "scenarios/server.yaml"):
        said = {int(m) for m in SIZE.findall((ROOT / f).read_text())}
        assert said == {millions}, f"{f} says ~{said}M, the small preset has ~{millions}M"


def test_every_hidden_secret_is_written_as_the_same_word():
    assert MASK == "[REDACTED]"
    sc = scenario_from_dict({
        "target": {"server": {"kind": "jax", "args": {"api_key": "sk-abc-123456"},
                              "env": {"HF_TOKEN": "hf-secret-999"}}},
        "api": {"headers": {"X-Api-Key": "k-123456789"}},
        "load": {"mode": "server", "rate": 1, "num_requests": 1}})
    text = resolved_yaml(sc)
    assert "sk-abc-123456" not in text and "hf-secret-999" not in text
    assert text.count(MASK) == 3 and "<redacted>" not in text
    assert redact_env({"API_KEY": "x", "MODE": "y"}) == {"API_KEY": MASK, "MODE": "y"}
    assert redact_argv(["vllm", "--api-key", "x"]) == ["vllm", "--api-key", MASK]

    class Spec:
        kind = "jax"
    assert describe_server(Spec(), ["--api-key", "x", "--port", "5"], None,
                           env={})["flags"]["api-key"] == MASK


def test_no_other_spelling_of_a_hidden_secret_in_code_or_docs():
    other = re.compile(r"<(?i:redacted)>|(?<!\[)REDACTED(?!\])")
    found = []
    for sub in ("loadgen", "servers", "analysis", "docs", "scenarios"):
        for f in (ROOT / sub).rglob("*"):
            if f.suffix in (".py", ".md", ".yaml") and f.is_file():
                for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                    if other.search(line):
                        found.append(f"{f.relative_to(ROOT)}:{i}")
    assert found == []
