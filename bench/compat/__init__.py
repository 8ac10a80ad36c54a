"""Real servers beside loadgen (vLLM CPU, llama.cpp's llama-server, transformers serve): install them,
make random-weight models with the JAX ``small`` shapes, record their answers as CI fixtures, and run the
compatibility matrix with the real ``loadgen run`` CLI (docs/real-servers.md, docs/compatibility.md).

    python -m bench.compat.install      installers into $LOADGEN_COMPAT_CACHE (paths.py), idempotent
    python -m bench.compat.models       models/small-hf/ and small-f32.gguf (models.py; nothing downloaded)
    python -m bench.compat.servers NAME start one server, print url/model/version (servers.py)
    python -m bench.compat.record       tests/fixtures/servers/<server>/<case>.json (record.py, wire.py)
    python -m bench.compat.matrix       docs/compatibility.md + .json (matrix.py, features.py)
    python -m bench.compat.lora         two random-weight LoRA adapters for small-hf (lora.py; no peft)
    python -m bench.compat.served       `loadgen run` on vLLM with n-gram speculation and with the LoRA
                                        adapters ─► bench/results/served-vllm-cpu-*, docs/compatibility.md

Imports: the standard library, numpy, yaml, its own modules and two of loadgen's pure ones (the
prompt words, the synthetic images); loadgen runs as a subprocess (``python -m loadgen run``).
llama.cpp's ``gguf`` package is loaded from the unpacked sdist's own tree (models._import_gguf), never
through sys.path.
"""
