"""The training data of `autospc train` and `demo`: a token stream and random [batch, seq] windows of it.

Sources: a text file (default: the small corpus shipped with autosp) read through the byte-level
tokenizer (token = byte, vocab 256) or an HF tokenizer found locally (by name in the local cache, or
a path); a tokenized `.bin` of raw little-endian uint16 or uint32 token ids; a directory written by
HF `datasets`' save_to_disk (an `input_ids` or a `text` column), when `datasets` is installed."""
from __future__ import annotations

import os

import numpy as np
import torch

CORPUS = os.path.join(os.path.dirname(__file__), "data", "corpus.txt")
VOCAB = 256
BIN_DTYPES = {"uint16": np.uint16, "uint32": np.uint32}


class DataError(ValueError):
    """The data or tokenizer the user named cannot be used: one line with the numbers."""


def encode(text: str) -> torch.Tensor:
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)


def decode(tokens: torch.Tensor) -> str:
    return bytes(int(t) for t in tokens).decode("utf-8", errors="replace")


class Tokenizer:
    """The byte tokenizer ("byte") or an HF tokenizer by name (already in the local cache) or path;
    nothing is downloaded."""

    def __init__(self, name: str = "byte"):
        self.name = name
        self.hf = None
        if name == "byte":
            self.vocab = VOCAB
            return
        from transformers import AutoTokenizer
        try:
            self.hf = AutoTokenizer.from_pretrained(name, local_files_only=True)
        except (OSError, ValueError) as e:
            raise DataError(f"tokenizer {name!r}: not found locally (a path, or a name in the local Hugging "
                            f"Face cache; nothing is downloaded): {str(e).splitlines()[0]}") from None
        self.vocab = len(self.hf)

    def encode(self, text: str) -> torch.Tensor:
        if self.hf is None:
            return encode(text)
        return torch.tensor(self.hf(text, add_special_tokens=False)["input_ids"], dtype=torch.long)


def read_tokens(path: str | None, tokenizer: Tokenizer, bin_dtype: str = "uint16") -> torch.Tensor:
    """The whole token stream of `path` (None: the shipped corpus) as a 1-D long tensor."""
    path = path or CORPUS
    if os.path.isdir(path):
        return _datasets_tokens(path, tokenizer)
    if not os.path.isfile(path):
        raise DataError(f"data {path!r}: no such file or directory")
    if path.endswith(".bin"):
        if bin_dtype not in BIN_DTYPES:
            raise DataError(f"--bin-dtype must be one of {sorted(BIN_DTYPES)}, got {bin_dtype!r}")
        item = np.dtype(BIN_DTYPES[bin_dtype]).itemsize
        size = os.path.getsize(path)
        if size % item:
            raise DataError(f"data {path}: {size} bytes is not a whole number of {bin_dtype} token ids")
        return torch.from_numpy(np.fromfile(path, dtype=np.dtype(BIN_DTYPES[bin_dtype]).newbyteorder("<"))
                                .astype(np.int64))
    with open(path, encoding="utf-8") as f:
        return tokenizer.encode(f.read())


def _datasets_tokens(path: str, tokenizer: Tokenizer) -> torch.Tensor:
    try:
        import datasets
    except ImportError:
        raise DataError(f"data {path}: reading a Hugging Face datasets directory needs the `datasets` "
                        "package, which is not installed (use a text file or a tokenized .bin)") from None
    ds = datasets.load_from_disk(path)
    if isinstance(ds, datasets.DatasetDict):
        ds = ds["train"] if "train" in ds else next(iter(ds.values()))
    if "input_ids" in ds.column_names:
        return torch.tensor([t for row in ds["input_ids"] for t in row], dtype=torch.long)
    if "text" in ds.column_names:
        return tokenizer.encode("\n".join(ds["text"]))
    raise DataError(f"data {path}: a datasets directory needs an `input_ids` or a `text` column, "
                    f"it has {ds.column_names}")


class TokenBatches:
    """Random [batch, seq] windows of a token stream; labels are the inputs (models shift them).
    The sampler's generator state is the data position (state() / set_state() for resume)."""

    def __init__(self, tokens: torch.Tensor, batch: int, seq_len: int, seed: int = 0, vocab: int | None = None):
        if len(tokens) <= seq_len:
            raise DataError(f"the data has {len(tokens)} tokens, fewer than seq_len + 1 = {seq_len + 1}")
        top = int(tokens.max())
        if vocab is not None and (top >= vocab or int(tokens.min()) < 0):
            raise DataError(f"the data holds token id {top}, outside the model's vocabulary of {vocab}")
        self.tokens, self.batch, self.seq_len = tokens, batch, seq_len
        self.gen = torch.Generator().manual_seed(seed)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, len(self.tokens) - self.seq_len, (self.batch,), generator=self.gen)
        ids = torch.stack([self.tokens[s:s + self.seq_len] for s in starts.tolist()])
        return ids, ids.clone()

    def state(self) -> torch.Tensor:
        return self.gen.get_state()

    def set_state(self, state: torch.Tensor) -> None:
        self.gen.set_state(state)
