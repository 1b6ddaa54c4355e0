"""Shared fixtures: small Hugging Face configs and a compile helper."""
from __future__ import annotations

import json
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)   # py:models:NAME
os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")   # spawned ranks too

_COMMON = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=256, torch_dtype="float32")
HF_CONFIGS = {
    "llama": dict(_COMMON, model_type="llama", architectures=["LlamaForCausalLM"]),
    "mistral": dict(_COMMON, model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=None),
    "qwen2": dict(_COMMON, model_type="qwen2", architectures=["Qwen2ForCausalLM"], tie_word_embeddings=True),
    # more causal LMs whose attention goes through SDPA: no model-specific code in autosp
    "gemma": dict(_COMMON, model_type="gemma", architectures=["GemmaForCausalLM"], head_dim=8),
    "phi3": dict(_COMMON, model_type="phi3", architectures=["Phi3ForCausalLM"], pad_token_id=0),
    "olmo2": dict(_COMMON, model_type="olmo2", architectures=["Olmo2ForCausalLM"], pad_token_id=0),
    "gpt_neox": dict(_COMMON, model_type="gpt_neox", architectures=["GPTNeoXForCausalLM"], rotary_pct=0.5,
                     num_key_value_heads=4),
    # sliding windows: every layer (Mistral), of 6 and of 20 positions; alternating local / global
    # layers (Gemma-3)
    "mistral_sw6": dict(_COMMON, model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=6),
    "mistral_sw20": dict(_COMMON, model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=20),
    "gemma3": dict(_COMMON, model_type="gemma3_text", architectures=["Gemma3ForCausalLM"], head_dim=8,
                   sliding_window=6, layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=8,
                   pad_token_id=0),
    # learned absolute positions (wpe), LayerNorm, GELU, Conv1D projections; no dropout so eager matches
    "gpt2": dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], vocab_size=96, n_embd=32, n_layer=2, n_head=4,
                 n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0),
    # learned positions counted by a cumsum of the attention mask (offset 2), no RoPE
    "opt": dict(model_type="opt", architectures=["OPTForCausalLM"], vocab_size=96, hidden_size=32, ffn_dim=64,
                num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32,
                dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, layerdrop=0.0, pad_token_id=1,
                bos_token_id=2, eos_token_id=2),
}


@pytest.fixture(scope="session", autouse=True)
def _temporary_files(tmp_path_factory):
    """Temporary files of the suite, and of the processes it starts (a failing compile's reproducer,
    autosp-<stage>-input-*.mlir, among them), go under pytest's temporary directory, which pytest
    prunes, instead of piling up in the system's."""
    import tempfile
    d = str(tmp_path_factory.mktemp("tmp"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tempfile, "tempdir", d)
        mp.setenv("TMPDIR", d)
        yield


@pytest.fixture(scope="session")
def hf_dir(tmp_path_factory):
    """hf_dir(name) -> a directory holding that model's config.json."""
    root = tmp_path_factory.mktemp("hf")

    def make(name: str) -> str:
        d = root / name
        if not d.exists():
            d.mkdir()
            (d / "config.json").write_text(json.dumps(HF_CONFIGS[name]))
        return str(d)
    return make


def spec_for(name: str, hf_dir) -> str:
    return f"hf:{hf_dir(name)}" if name in HF_CONFIGS else name


@pytest.fixture
def compile_to(tmp_path):
    """compile_to(spec, sp, dp=1, batch=2, seq=16, remat="sac", precision="fp32", attention="auto",
    packed=False) -> saved artifact path."""
    import autosp
    from autosp.frontend import load_model

    def run(spec: str, sp: int, dp: int = 1, batch: int = 2, seq: int = 16, remat: str = "sac",
            precision: str = "fp32", attention: str = "auto", packed: bool = False) -> str:
        model = load_model(spec, empty=True)
        ids = torch.zeros(batch, seq, dtype=torch.long)
        path = str(tmp_path / f"m-sp{sp}-dp{dp}-{remat}-{precision}-{attention}{'-packed' * packed}.autosp")
        autosp.compile(model, (ids, ids), sp=sp, dp=dp, remat=remat, model_name=spec,
                       precision=precision, attention=attention, packed=packed).save(path)
        return path
    return run
