"""scenario: what to run, decided before anything runs. Pure: no I/O beyond reading the files named.

    scenarios/*.yaml ─► loader.py (defaults → YAML → --set; ScenarioError = one line) ─► model.py (strict pydantic)
                    ─► workload.py (prompts and output lengths: synthetic, JSONL, ShareGPT; seeded)
                       + images.py / audio.py (workload.images / workload.audio: seeded pools)
                    ─► schedule.py (arrival offsets: poisson | constant | gamma; seeded, pure)
                    dataset.py (workload.dataset: prompts with expected answers; pattern.py: its
                    regexes, RE2), cost.py (prices),
                    sweep.py (the sweep block: points or a search)
                    ─► run/ (the runner hands specs + schedule to dispatch)

May import: the standard library, pydantic, numpy, tokenizers, re2 (google-re2), and loadgen.record. Never the
client, the runner or anything that opens a socket.
"""
