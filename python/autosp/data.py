"""The training data of `autospc train` and `demo`: a small text corpus shipped with autosp, read
through a byte-level tokenizer (token = byte, vocab 256)."""
from __future__ import annotations

import os

import torch

CORPUS = os.path.join(os.path.dirname(__file__), "data", "corpus.txt")
VOCAB = 256


def encode(text: str) -> torch.Tensor:
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)


def decode(tokens: torch.Tensor) -> str:
    return bytes(int(t) for t in tokens).decode("utf-8", errors="replace")


class ByteBatches:
    """Random [batch, seq] windows of the corpus; labels are the inputs (models shift them)."""

    def __init__(self, batch: int, seq_len: int, seed: int = 0, path: str = CORPUS):
        with open(path, encoding="utf-8") as f:
            self.tokens = encode(f.read())
        if len(self.tokens) <= seq_len:
            raise ValueError(f"corpus has {len(self.tokens)} tokens, fewer than seq_len={seq_len}")
        self.batch, self.seq_len = batch, seq_len
        self.gen = torch.Generator().manual_seed(seed)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, len(self.tokens) - self.seq_len, (self.batch,), generator=self.gen)
        ids = torch.stack([self.tokens[s:s + self.seq_len] for s in starts.tolist()])
        return ids, ids.clone()
