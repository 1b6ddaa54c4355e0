"""The compiled program on P ranks vs the unmodified model on one process, fp32 on CPU:
loss and every gradient within 1e-5 relative, over three AdamW steps in lockstep."""
from __future__ import annotations

import json

import pytest

from autosp.verify import verify
from conftest import spec_for

TOL = 1e-5
MODELS = ["builtin:tiny-llama", "llama", "mistral", "qwen2"]


def _check(reports, steps):
    for r in reports:
        assert r.steps == steps
        assert r.loss_rel_err <= TOL, f"loss {r.loss} vs eager {r.eager_loss}"
        bad = [(n, e) for n, e in r.worst if e > TOL]
        assert not bad, f"gradients off: {bad[:5]}"
        assert r.worst, "no gradients compared"


@pytest.mark.parametrize("sp", [1, 2, 4])
@pytest.mark.parametrize("model", MODELS)
def test_matches_eager(model, sp, hf_dir, compile_to):
    spec = spec_for(model, hf_dir)
    _check(verify(compile_to(spec, sp), spec, nproc=sp, steps=3), steps=3)


@pytest.mark.parametrize("model", ["gemma", "phi3", "olmo2", "gpt_neox"])
def test_other_sdpa_models(model, hf_dir, compile_to):
    spec = spec_for(model, hf_dir)
    _check(verify(compile_to(spec, 2), spec, nproc=2, steps=1), steps=1)


@pytest.mark.parametrize("sp", [2, 4])
@pytest.mark.parametrize("model", ["gpt2", "opt"])
def test_learned_positions(model, sp, hf_dir, compile_to):
    """GPT-2 builds its positions replicated ([1, S]) and embeds them whole: the position embedding's
    gradient must scatter each rank's own rows only (the indices sharded as the gradient is). OPT
    counts its positions with a cumsum of an all-ones mask, which the capture folds to an arange, so
    each rank embeds its global positions (its key biases' gradients are zero: see verify.FP32_EPS)."""
    spec = spec_for(model, hf_dir)
    _check(verify(compile_to(spec, sp), spec, nproc=sp, steps=2), steps=2)


def test_sp2_dp2_matches_ddp(compile_to):
    """world 4 = sp 2 x dp 2: every replica its own batch, gradients averaged as DDP does."""
    reports = verify(compile_to("builtin:tiny-llama", sp=2, dp=2), "builtin:tiny-llama", nproc=4, steps=3)
    _check(reports, steps=3)
    assert reports[0].loss == reports[1].loss and reports[0].loss != reports[2].loss  # replicas differ


@pytest.mark.parametrize("model,sp,attention,scheme", [
    ("mistral_sw6", 2, "auto", "ulysses 2"),   # a window of 6 inside each rank's 16 positions
    ("mistral_sw6", 4, "auto", "ring 4"),      # blocks of 8: each K/V block travels one hop
    ("mistral_sw20", 4, "auto", "ulysses 4"),  # a window over 3 blocks
    ("gemma3", 4, "ring", "ring 4"),           # local and global layers in one ring
])
def test_sliding_windows(model, sp, attention, scheme, hf_dir, compile_to):
    """Sliding-window attention (transformers' sliding_window) as a window, not a mask: exact at
    windows smaller and larger than a rank's share of the sequence."""
    spec = spec_for(model, hf_dir)
    path = compile_to(spec, sp, seq=32, attention=attention)
    with open(f"{path}/plan.json") as f:
        assert json.load(f)["attention"]["scheme"] == scheme
    _check(verify(path, spec, nproc=sp, steps=2), steps=2)


def test_full_attention(compile_to):
    """Attention that is not causal, sharded over 2 ranks."""
    spec = "py:models:full_attention"
    _check(verify(compile_to(spec, sp=2), spec, nproc=2, steps=1), steps=1)


@pytest.mark.parametrize("model,sp,batch,seq,padded", [
    ("builtin:tiny-llama", 3, 1, 1000, 1002),   # ring 3, zigzag chunks of the padded sequence
    ("llama", 4, 1, 1000, None),                # 4 and 8 divide 1000: no padding
    ("qwen2", 8, 1, 1000, None),
    ("mistral", 4, 2, 50, 56),                  # Ulysses over the padded sequence
    ("gpt2", 3, 2, 40, 42),                     # learned positions: the padded ones are embedded too
])
def test_uneven_lengths(model, sp, batch, seq, padded, hf_dir, compile_to):
    """A length sp does not divide is padded inside the step (sp-pad-sequence): the loss and the
    gradients are those of the unpadded tokens."""
    spec = spec_for(model, hf_dir)
    path = compile_to(spec, sp, batch=batch, seq=seq)
    with open(f"{path}/manifest.json") as f:
        manifest = json.load(f)
    assert (manifest["seq_len"], manifest.get("padded_seq_len")) == (seq, padded)
    _check(verify(path, spec, nproc=sp, steps=2), steps=2)


def test_mqa_tied_kv_repeated(compile_to):
    """One KV head on 2 ranks: it is repeated once before the all-to-all, so each rank receives the
    KV head its query heads read (kv_heads % P != 0); tied embeddings."""
    spec = "py:models:tiny_llama_tied"
    _check(verify(compile_to(spec, sp=2, seq=32), spec, nproc=2, steps=1), steps=1)


@pytest.mark.parametrize("model,sp,attention,seq,scheme,order", [
    # 4 heads, 2 KV heads on 3 ranks: only the ring fits
    ("builtin:tiny-llama", 3, "auto", 24, "ring 3", "zigzag"),
    ("builtin:tiny-llama", 3, "auto", 27, "ring 3", "contiguous"),   # 27 tokens: no 6 zigzag chunks
    ("llama", 2, "ring", 16, "ring 2", "zigzag"),                     # asked for where Ulysses would do
    ("py:models:tiny_llama_tied", 4, "ring", 32, "ring 4", "zigzag"),  # one KV head travels as it is
    ("builtin:tiny-llama", 4, "hybrid", 32, "hybrid 2x2", "zigzag"),  # asked for
    ("builtin:tiny-llama", 6, "auto", 24, "hybrid 2x3", "zigzag"),    # the fewest bytes
    ("qwen2", 8, "auto", 16, "hybrid 2x4", "zigzag"),                 # more ranks than heads
])
def test_attention_schemes(model, sp, attention, seq, scheme, order, hf_dir, compile_to):
    """Ring attention (each rank keeps its shard of the sequence, zigzag chunks for causal balance
    where the sequence cuts into 2 x r chunks, K/V blocks at KV-head width pass around the ranks) and
    hybrid Ulysses x ring: any sp for any head count."""
    spec = spec_for(model, hf_dir)
    path = compile_to(spec, sp, seq=seq, attention=attention)
    with open(f"{path}/program.json") as f:
        assert json.load(f)["mesh"].get("order", "contiguous") == order
    with open(f"{path}/plan.json") as f:
        assert json.load(f)["attention"]["scheme"] == scheme
    _check(verify(path, spec, nproc=sp, steps=2), steps=2)


@pytest.mark.parametrize("model,sp,attention,seq,scheme", [
    ("llama", 2, "auto", 16, "ulysses 2"),
    ("llama", 4, "ring", 16, "ring 4"),              # zigzag blocks
    ("llama", 4, "hybrid", 30, "hybrid 2x2"),        # padded to 32 inside the step
    ("mistral_sw6", 4, "auto", 32, "ring 4"),        # documents inside a sliding window
    ("gpt2", 2, "auto", 16, "ulysses 2"),            # learned positions from position_ids
])
def test_packed_documents(model, sp, attention, seq, scheme, hf_dir, compile_to):
    """compile(packed=True): one step of documents packed in each row (position_ids restarting at
    random cuts, as Hugging Face packs them) and one of right padding (attention_mask), against the
    eager model given the same position_ids / attention_mask."""
    spec = spec_for(model, hf_dir)
    path = compile_to(spec, sp, seq=seq, attention=attention, packed=True)
    with open(f"{path}/plan.json") as f:
        assert json.load(f)["attention"]["scheme"] == scheme
    _check(verify(path, spec, nproc=sp, steps=2), steps=2)
