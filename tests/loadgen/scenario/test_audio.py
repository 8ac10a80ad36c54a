"""loadgen.scenario.audio and workload.audio: seeded WAV clips, dealt in turn, transcriptions only;
bad values are one line and exit 2 through the CLI."""
import io
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from loadgen.scenario.audio import Audio, AudioPool, make_wav, probe_clip
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.strict import ScenarioError
from loadgen.scenario.workload import build_workload

ROOT = Path(__file__).resolve().parents[3]


def test_the_same_seed_makes_the_same_bytes_and_others_differ():
    a, secs = make_wav(0, 1, 0.5, 16000)
    assert a == make_wav(0, 1, 0.5, 16000)[0] and secs == 0.5
    assert a != make_wav(0, 2, 0.5, 16000)[0] and a != make_wav(1, 1, 0.5, 16000)[0]


@pytest.mark.parametrize("rate", [8000, 16000, 44100])
def test_clips_are_16_bit_mono_pcm_wav_of_the_asked_length_and_not_silence(rate):
    pool = AudioPool(Audio(seconds=0.25, sample_rate=rate, pool=3), seed=4)
    assert len({c.data for c in pool.clips}) == 3
    with wave.open(io.BytesIO(pool.clips[0].data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, rate)
        assert w.getnframes() == round(0.25 * rate)
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(float) / 32767
    assert 0.02 < np.sqrt(np.mean(x ** 2)) < 0.5 and np.abs(x).max() < 1
    assert [pool.for_request(k).key for k in range(5)] == [0, 1, 2, 0, 1]
    assert pool.describe()["bytes_max"] == 44 + 2 * round(0.25 * rate)
    assert probe_clip().seconds == 1.0 and probe_clip().key == -1


def tree(**over):
    t = {"target": {"url": "http://127.0.0.1:1"}, "api": {"endpoint": "transcriptions"},
         "workload": {"audio": {"seconds": 1, "pool": 2}},
         "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 3}}
    for k, v in over.items():
        t[k] = {**t[k], **v}
    return t


def test_the_workload_carries_a_clip_per_request_and_no_text():
    plan = build_workload(scenario_from_dict(tree()).workload)
    specs = plan.take(3)
    assert [s.audio.key for s in specs] == [0, 1, 0]
    assert all(s.prompt == "" and s.prompt_tokens is None for s in specs)
    assert plan.describe()["audio"]["sample_rate"] == 16000


@pytest.mark.parametrize("over,msg", [
    ({"workload": {"audio": {"seconds": 0}}}, "workload.audio.seconds"),
    ({"workload": {"audio": {"seconds": 601}}}, "workload.audio.seconds"),
    ({"workload": {"audio": {"sample_rate": 12345}}}, "workload.audio.sample_rate"),
    ({"workload": {"audio": {"format": "mp3"}}}, "workload.audio.format"),
    ({"workload": {"audio": {"pool": 0}}}, "workload.audio.pool"),
    ({"api": {"endpoint": "chat"}}, "workload.audio: api.endpoint transcriptions"),
    ({"workload": {"audio": None}}, "workload.audio: api.endpoint transcriptions"),
    ({"workload": {"source": "jsonl", "path": "x.jsonl"}}, "workload.audio: not with workload.source"),
])
def test_bad_audio_settings_are_one_line(over, msg):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tree(**over))
    assert msg in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("sets,msg", [
    (["workload.audio.sample_rate=12345"], "workload.audio.sample_rate"),
    (["workload.audio.seconds=-1"], "workload.audio.seconds"),
    (["api.endpoint=completions"], "workload.audio"),
])
def test_bad_audio_values_exit_2_with_one_line_through_the_cli(tmp_path, sets, msg):
    p = ROOT / "scenarios" / "audio.yaml"
    args = [sys.executable, "-m", "loadgen", "run", str(p), "--set", f"output.dir={tmp_path}"]
    for s in sets:
        args += ["--set", s]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0] and "Traceback" not in r.stderr
