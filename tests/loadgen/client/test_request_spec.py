"""One request spec from the plan to the wire: ``RequestSpec.of`` is the one constructor (issue
#37). The plan, a session turn, the probe stream, the preflight probe, the benches and the tests
all build a client spec from a frozen workload PromptSpec through it, so a new per-request field
is copied in one place; a static check keeps any other module from calling ``RequestSpec(``."""
import ast
from pathlib import Path

from loadgen.client.http_client import RequestSpec
from loadgen.scenario.workload import PromptSpec
from tests.support.source import parse

ROOT = Path(__file__).resolve().parents[3]
HOME = "loadgen/client/http_client.py"          # the spec's own module
SELF = "tests/loadgen/client/test_request_spec.py"
TREES = ("loadgen", "analysis", "servers", "bench", "tests")


def direct_calls(source: str) -> list[int]:
    """Lines where ``RequestSpec(...)`` or ``<anything>.RequestSpec(...)`` is called."""
    out = []
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name == "RequestSpec":
                out.append(node.lineno)
    return out


def test_no_module_but_the_specs_own_builds_one_directly():
    found = []
    for top in TREES:
        for p in sorted((ROOT / top).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel in (HOME, SELF) or rel.startswith("tests/support/"):
                continue
            text = p.read_text()
            if "RequestSpec" in text:            # parse only what names it (fast)
                found += [f"{rel}:{n}" for n in direct_calls(text)]
    assert found == [], "build it with RequestSpec.of (loadgen/client/http_client.py)"


def test_the_checker_sees_a_direct_call_in_any_spelling():
    src = ("from loadgen.client import http_client as h\n"
           "a = RequestSpec(1, 'measured', 'x', 1, 2)\n"
           "b = h.RequestSpec(id=1)\n"
           "c = RequestSpec.of(p, 1)\n")
    assert direct_calls(src) == [2, 3]


def test_of_copies_every_field_of_the_frozen_spec():
    p = PromptSpec("hi", 2, 8, messages=({"role": "user", "content": "hi"},), images=("data:x",),
                   expected=("exact", "4"), audio="clip", id=9, phase="warmup", offset_ns=5)
    s = RequestSpec.of(p, 3)
    assert (s.id, s.phase, s.prompt, s.prompt_tokens, s.max_tokens, s.scheduled_at_ns) == (
        3, "measured", "hi", 2, 8, None)
    assert s.messages == [{"role": "user", "content": "hi"}] and isinstance(s.messages, list)
    assert (s.images, s.expected, s.audio) == (("data:x",), ("exact", "4"), "clip")
    assert (s.session_id, s.turn, s.want_text, s.headers) == (None, None, False, None)


def test_a_session_turn_adds_what_the_sender_knows_at_the_send():
    msgs = [{"role": "user", "content": "again"}]
    s = RequestSpec.of(PromptSpec("again", 1, 4, messages=({"role": "user", "content": "x"},)),
                       7, "probe", messages=msgs, session_id="s1", turn=2, want_text=True,
                       headers={"x-session": "s1"})
    assert s.messages is msgs          # the conversation so far wins over the workload's own
    assert (s.phase, s.session_id, s.turn, s.want_text, s.headers) == (
        "probe", "s1", 2, True, {"x-session": "s1"})
    assert RequestSpec.of(PromptSpec("x", None, 1), 0).messages is None
