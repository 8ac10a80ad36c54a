"""Workload: seeded prompts of the requested lengths, files read strictly, exact counters exact."""
import json

import numpy as np
import pytest

from loadgen.scenario.model import Dist, ScenarioError, Workload
from loadgen.scenario.tokens import WORDS
from loadgen.scenario.workload import build_workload, sample_lengths


def W(**kw):
    return Workload(**kw)


def test_bytes_prompts_have_exact_lengths_and_ascii():
    plan = build_workload(W(tokenizer="bytes", prompt_tokens=Dist(dist="uniform", min=5, max=300),
                            output_tokens=Dist(dist="fixed", value=7)))
    specs = plan.take(50)
    assert plan.token_count == "exact"
    for s in specs:
        assert len(s.prompt.encode()) == s.prompt_tokens and s.prompt.isascii()
        assert 5 <= s.prompt_tokens <= 300 and s.max_tokens == 7
    assert len({s.prompt for s in specs}) == 50          # distinct prompts (no accidental cache hits)


def test_words_counts_are_word_counts_labelled_approximate():
    plan = build_workload(W(prompt_tokens=Dist(dist="fixed", value=40)))
    assert plan.token_count == "approximate" and plan.describe()["tokenizer"] == "words"
    for s in plan.take(5):
        words = s.prompt.split()
        assert len(words) == 40 == s.prompt_tokens and set(words) <= set(WORDS)


def test_seeded_reproducible_and_seed_dependent():
    a = build_workload(W(seed=3, prompt_tokens=Dist(dist="uniform", min=1, max=50))).take(20)
    b = build_workload(W(seed=3, prompt_tokens=Dist(dist="uniform", min=1, max=50))).take(20)
    c = build_workload(W(seed=4, prompt_tokens=Dist(dist="uniform", min=1, max=50))).take(20)
    assert a == b and a != c
    # the stream does not depend on how it is consumed
    plan = build_workload(W(seed=3, prompt_tokens=Dist(dist="uniform", min=1, max=50)))
    it = iter(plan)
    assert [next(it) for _ in range(20)] == a


def test_lognormal_mean_std_are_those_of_the_lengths():
    x = sample_lengths(Dist(dist="lognormal", mean=200, std=80), np.random.default_rng(0), 40_000)
    assert x.mean() == pytest.approx(200, rel=0.02)
    assert x.std() == pytest.approx(80, rel=0.05)


def test_normal_clipped_and_fixed():
    x = sample_lengths(Dist(dist="normal", mean=10, std=20, min=4, max=15),
                       np.random.default_rng(1), 5000)
    assert x.min() == 4 and x.max() == 15
    assert set(sample_lengths(Dist(dist="fixed", value=9), np.random.default_rng(), 10)) == {9}


def test_shared_prefix_is_common_and_counted():
    plan = build_workload(W(tokenizer="bytes", shared_prefix_tokens=24,
                            prompt_tokens=Dist(dist="fixed", value=40)))
    specs = plan.take(10)
    prefix = specs[0].prompt[:24]
    assert all(s.prompt.startswith(prefix) and s.prompt_tokens == 64 for s in specs)
    assert len({s.prompt[24:] for s in specs}) == 10


def test_jsonl_file(tmp_path):
    p = tmp_path / "w.jsonl"
    p.write_text(json.dumps({"prompt": "hello there", "max_tokens": 5}) + "\n\n"
                 + json.dumps({"prompt": "abc"}) + "\n")
    plan = build_workload(W(source="jsonl", path=str(p), tokenizer="bytes",
                            output_tokens=Dist(dist="fixed", value=11)))
    s = plan.take(4)
    assert [(x.prompt, x.prompt_tokens, x.max_tokens) for x in s] == [
        ("hello there", 11, 5), ("abc", 3, 11), ("hello there", 11, 5), ("abc", 3, 11)]
    ignore = build_workload(W(source="jsonl", path=str(p), output_tokens_from_file=False,
                              output_tokens=Dist(dist="fixed", value=2))).take(1)
    assert ignore[0].max_tokens == 2


@pytest.mark.parametrize("body, needle", [
    ('{"prompt": "x"}\n{not json\n', ":2: not valid JSON"),
    ('{"text": "x"}\n', ":1: prompt: missing"),
    ('{"prompt": "x", "max_tokens": 0}\n', ":1: max_tokens: must be an integer from 1"),
    ("\n", "no usable prompts"),
])
def test_jsonl_errors_name_the_field(tmp_path, body, needle):
    p = tmp_path / "bad.jsonl"
    p.write_text(body)
    with pytest.raises(ScenarioError) as e:
        build_workload(W(source="jsonl", path=str(p)))
    msg = str(e.value)
    assert msg.startswith("workload.path: ") and needle in msg and "\n" not in msg


def test_missing_file():
    with pytest.raises(ScenarioError, match=r"^workload.path: /nonexistent/x.json: no such file"):
        build_workload(W(source="sharegpt", path="/nonexistent/x.json"))


def test_sharegpt(tmp_path):
    data = [
        {"id": "a", "conversations": [{"from": "human", "value": "What is two plus two?"},
                                      {"from": "gpt", "value": "Four."}]},
        {"id": "b", "conversations": [{"from": "system", "value": "be brief"},
                                      {"from": "human", "value": "Name a colour"}]},
        {"id": "c", "conversations": [{"from": "gpt", "value": "orphan reply"}]},
        "not a conversation",
    ]
    p = tmp_path / "sg.json"
    p.write_text(json.dumps(data))
    plan = build_workload(W(source="sharegpt", path=str(p), tokenizer="bytes",
                            output_tokens=Dist(dist="fixed", value=9)))
    assert plan.describe()["file_prompts"] == 2
    s = plan.take(2)
    assert (s[0].prompt, s[0].prompt_tokens, s[0].max_tokens) == ("What is two plus two?", 21, 5)
    assert (s[1].prompt, s[1].max_tokens) == ("Name a colour", 9)   # no reply: the Dist
    bad = tmp_path / "bad.json"
    bad.write_text('{"conversations": []}')
    with pytest.raises(ScenarioError, match="must be a JSON list"):
        build_workload(W(source="sharegpt", path=str(bad)))


def _tiny_bpe(path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS, 12)) for _ in range(300)]
    tok.train_from_iterator(lines, trainer)
    tok.save(str(path))
    return tok


def test_tokenizer_json_gives_exact_lengths(tmp_path):
    tok = _tiny_bpe(tmp_path / "tokenizer.json")
    plan = build_workload(W(tokenizer=str(tmp_path), prompt_tokens=Dist(dist="uniform", min=8,
                                                                          max=120)))
    assert plan.token_count == "exact"
    for s in plan.take(20):
        assert len(tok.encode(s.prompt, add_special_tokens=False).ids) == s.prompt_tokens
        assert 8 <= s.prompt_tokens <= 120
    fixed = build_workload(W(tokenizer=str(tmp_path), prompt_tokens=Dist(dist="fixed", value=50)))
    for s in fixed.take(20):                           # the requested length, exactly
        assert s.prompt_tokens == 50 == len(tok.encode(s.prompt, add_special_tokens=False).ids)


def test_bad_tokenizer_path(tmp_path):
    with pytest.raises(ScenarioError, match="^workload.tokenizer: .*no such tokenizer.json"):
        build_workload(W(tokenizer=str(tmp_path / "nope")))
    junk = tmp_path / "tokenizer.json"
    junk.write_text("{not a tokenizer")
    with pytest.raises(ScenarioError, match="^workload.tokenizer: .*cannot load"):
        build_workload(W(tokenizer=str(junk)))
