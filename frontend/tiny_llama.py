"""`builtin:tiny-llama`: a small Llama shipped with autosp (no transformers needed).

Parameter names follow Hugging Face's LlamaForCausalLM, positions are built with `arange` inside
the model and the label shift pads then slices, as transformers does, so it exercises the same
paths as a real checkpoint.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class TinyLlamaConfig:
    vocab_size: int = 256          # byte-level tokenizer
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    is_causal: bool = True         # False: every position attends to every other


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, c: TinyLlamaConfig):
        super().__init__()
        self.h, self.kvh, self.causal = c.num_attention_heads, c.num_key_value_heads, c.is_causal
        self.hd = c.hidden_size // c.num_attention_heads
        self.q_proj = nn.Linear(c.hidden_size, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, self.kvh * self.hd, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, self.kvh * self.hd, bias=False)
        self.o_proj = nn.Linear(self.h * self.hd, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kvh, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kvh, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, enable_gqa=self.kvh != self.h)
        return self.o_proj(a.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, c: TinyLlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: TinyLlamaConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyLlamaModel(nn.Module):
    def __init__(self, c: TinyLlamaConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        hd = c.hidden_size // c.num_attention_heads
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        pos = torch.arange(input_ids.shape[1], device=input_ids.device).float()
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class TinyLlamaForCausalLM(nn.Module):
    def __init__(self, config: TinyLlamaConfig | None = None):
        super().__init__()
        self.config = c = config or TinyLlamaConfig()
        self.model = TinyLlamaModel(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
        logits = self.lm_head(self.model(input_ids)).float()
        # transformers' ForCausalLMLoss: pad then shift, so the last position is ignored
        shift = F.pad(labels, (0, 1), value=ignore_index)[..., 1:].contiguous()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), shift.view(-1), ignore_index=ignore_index)
