"""Small models that exercise the compiler's user-facing errors and features (loaded as py:models:NAME)."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from autosp.frontend.tiny_llama import TinyLlamaConfig, TinyLlamaForCausalLM


class _Base(nn.Module):
    def __init__(self, vocab: int = 64, d: int = 32, heads: int = 4):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.emb = nn.Embedding(vocab, d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.head = nn.Linear(d, vocab, bias=False)

    def split(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        return q, k, v

    def attend(self, q, k, v):
        raise NotImplementedError

    def forward(self, input_ids, labels):
        x = self.emb(input_ids)
        a = self.attend(*self.split(x))
        x = x + a.transpose(1, 2).reshape(x.shape)
        logits = self.head(x)
        shift = F.pad(labels, (0, 1), value=-100)[..., 1:]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), shift.reshape(-1))


class ManualAttention(_Base):
    """Attention by hand: softmax(q k^T) v, not through SDPA."""

    def attend(self, q, k, v):
        scores = q @ k.transpose(-2, -1) / self.hd ** 0.5
        return torch.softmax(scores, dim=-1) @ v


class MaskedAttention(_Base):
    def attend(self, q, k, v):
        s = q.shape[2]
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class DropoutAttention(_Base):
    def attend(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)


class CumsumModel(_Base):
    """Uses an op outside the runtime's allowlist (cumsum)."""

    def attend(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).cumsum(dim=-1)


class _DropoutBlock(nn.Module):
    def __init__(self, d: int, heads: int, p: float):
        super().__init__()
        self.h = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.up, self.down = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        x = x + self.drop(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d))
        return x + self.drop(self.down(F.gelu(self.up(x))))


class DropoutModel(nn.Module):
    """Two layers; dropout (F.dropout, nn.Dropout) on the embeddings and on both residual branches."""

    def __init__(self, vocab: int = 64, d: int = 32, heads: int = 4, p: float = 0.1):
        super().__init__()
        self.p = p
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(_DropoutBlock(d, heads, p) for _ in range(2))
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, labels):
        x = F.dropout(self.emb(input_ids), self.p, self.training)
        for layer in self.layers:
            x = layer(x)
        logits = self.head(x)
        shift = F.pad(labels, (0, 1), value=-100)[..., 1:]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), shift.reshape(-1))


def manual_attention() -> nn.Module:
    return ManualAttention()


def masked_attention() -> nn.Module:
    return MaskedAttention()


def full_attention() -> nn.Module:
    """tiny-llama whose attention is not causal."""
    return TinyLlamaForCausalLM(TinyLlamaConfig(is_causal=False))


def dropout_attention() -> nn.Module:
    return DropoutAttention()


def cumsum_model() -> nn.Module:
    return CumsumModel()


def tiny_llama_tied() -> nn.Module:
    """tiny-llama with tied input/output embeddings and one KV head (MQA)."""
    return TinyLlamaForCausalLM(TinyLlamaConfig(num_key_value_heads=1, tie_word_embeddings=True))


def dropout_model() -> nn.Module:
    return DropoutModel()


def one_layer_llama() -> nn.Module:
    """The smallest tiny-llama with every part of one (GQA, RoPE, MLP): test/lit/Inputs/tiny-llama-step.mlir."""
    return TinyLlamaForCausalLM(TinyLlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                                                num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))
