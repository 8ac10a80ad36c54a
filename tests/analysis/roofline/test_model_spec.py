"""A shape dict from a HF config.json; parameter counts checked against the published ones."""
import json

import pytest

from analysis.roofline import model_cost
from analysis.roofline.model_spec import ModelSpecError, from_hf_config

# the fields of Qwen/Qwen2.5-0.5B's and meta-llama/Llama-3.2-1B's config.json that matter here
QWEN = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
        "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "intermediate_size": 4864, "vocab_size": 151936, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "max_position_embeddings": 32768}
LLAMA = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
         "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
         "vocab_size": 128256, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
         "head_dim": 64, "max_position_embeddings": 131072}


def test_published_parameter_counts():
    q = from_hf_config(QWEN, name="qwen2.5-0.5b")
    assert q["n_params"] == 494_032_768           # the model card's 0.49B (q/k/v biases included)
    assert (q["head_dim"], q["n_kv_heads"], q["dtype"], q["dtype_bytes"]) == (64, 2, "bf16", 2)
    assert from_hf_config(LLAMA)["n_params"] == 1_235_814_400   # Llama 3.2 1B: 1.24B
    # the cost arithmetic takes the dict as it is: K and V, 16 layers x 8 heads x 64 x 2 bytes
    assert model_cost.kv_bytes_per_token(from_hf_config(LLAMA)) == 2 * 16 * 8 * 64 * 2


def test_file_directory_and_overrides(tmp_path):
    d = tmp_path / "Qwen2.5-0.5B"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(QWEN))
    s = from_hf_config(d, dtype="fp32", max_model_len=2048, slots=8)
    assert s["name"] == "Qwen2.5-0.5B"
    assert (s["dtype"], s["dtype_bytes"], s["max_model_len"], s["slots"]) == ("fp32", 4, 2048, 8)
    assert from_hf_config(d / "config.json")["max_model_len"] == 32768
    assert from_hf_config(d / "config.json")["slots"] is None


def test_bad_configs_name_the_problem(tmp_path):
    with pytest.raises(ModelSpecError, match="lacks hidden_size"):
        from_hf_config({k: v for k, v in LLAMA.items() if k != "hidden_size"})
    with pytest.raises(ModelSpecError, match="not a multiple"):
        from_hf_config({**LLAMA, "num_key_value_heads": 5})
    with pytest.raises(ModelSpecError, match="dtype"):
        from_hf_config({**LLAMA, "torch_dtype": "int4"})
    (tmp_path / "config.json").write_text("{oops")
    with pytest.raises(ModelSpecError, match="not valid JSON"):
        from_hf_config(tmp_path)
    with pytest.raises(ModelSpecError, match="no such file"):
        from_hf_config(tmp_path / "missing")
