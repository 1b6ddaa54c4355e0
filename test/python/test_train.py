"""autospc train: exact resume (model, optimizer, RNG, data position; with and without dropout), data
from a tokenized .bin, the per-step log, a local HF tokenizer."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import autosp
from autosp.cli.autospc import main
from autosp.frontend import load_model


def _compile(spec: str, path: str, sp: int = 2, seq: int = 16, batch: int = 2) -> str:
    ids = torch.zeros(batch, seq, dtype=torch.long)
    autosp.compile(load_model(spec, empty=True), (ids, ids), sp=sp, model_name=spec).save(path)
    return path


@pytest.fixture(autouse=True)
def _keep_threads():
    """`autospc train` on one rank runs in this process and sets its thread pool (--threads)."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny1(tmp_path_factory) -> str:
    return _compile("builtin:tiny-llama", str(tmp_path_factory.mktemp("tiny") / "t.autosp"), sp=1)


def _losses(log: str) -> list[tuple[int, float]]:
    with open(log) as f:
        return [(r["step"], r["loss"]) for r in map(json.loads, f)]


@pytest.mark.parametrize("spec,sp,zero", [("builtin:tiny-llama", 1, []), ("py:models:dropout_model", 2, []),
                                          ("builtin:tiny-llama", 2, ["--zero"])])
def test_resume_is_bit_identical(spec, sp, zero, tmp_path):
    """4 steps straight (checkpoints every 2) vs the same run resumed from step 2 (new ranks at sp=2);
    with dropout at sp=2 every rank's generator must be restored; with --zero the sharded AdamW states
    are gathered into the checkpoint and sharded again on resume."""
    art = _compile(spec, str(tmp_path / "m.autosp"), sp=sp)
    data = str(tmp_path / "tokens.bin")   # token ids < 64: both models' vocabularies
    np.random.default_rng(0).integers(0, 64, 4000).astype("<u2").tofile(data)
    common = [art, "--nproc", str(sp), "--steps", "4", "--data", data, "--bin-dtype", "uint16", "--lr", "1e-2", *zero]
    ck = str(tmp_path / "ck")
    assert main(["train", *common, "--checkpoint", ck, "--save-every", "2", "--log", str(tmp_path / "a.jsonl")]) == 0
    assert sorted(os.listdir(ck)) == ["latest.json", "step-2", "step-4"]
    assert sorted(os.listdir(os.path.join(ck, "step-2"))) == [
        "meta.json", "model.safetensors", "optimizer.json", "optimizer.safetensors",
        *[f"rank-{r}.safetensors" for r in range(sp)]]
    assert main(["train", *common, "--resume", os.path.join(ck, "step-2"), "--log", str(tmp_path / "b.jsonl")]) == 0
    straight, resumed = _losses(str(tmp_path / "a.jsonl")), _losses(str(tmp_path / "b.jsonl"))
    assert [s for s, _ in straight] == [1, 2, 3, 4] and [s for s, _ in resumed] == [3, 4]
    assert resumed == straight[2:]                      # bit-identical, not close
    assert straight[3][1] != straight[1][1]


def test_rng_state_round_trip(tmp_path):
    """The dropout generator is in rng_state(): restoring it (and torch's) repeats the masks exactly."""
    m = autosp.load(_compile("py:models:dropout_model", str(tmp_path / "d.autosp"), sp=1))
    m.load_state_dict(load_model("py:models:dropout_model").state_dict())
    ids = torch.randint(0, 64, m.input_shape, generator=torch.Generator().manual_seed(0))
    m(ids, ids)
    state, cpu = m.rng_state(), torch.get_rng_state()
    first = m(ids, ids).item()
    assert m(ids, ids).item() != first                  # the masks move on
    m.set_rng_state(state)
    torch.set_rng_state(cpu)
    assert m(ids, ids).item() == first


def test_log_csv_and_threads(tiny1, tmp_path, capsys):
    art = tiny1
    log = str(tmp_path / "log.csv")
    assert main(["train", art, "--steps", "3", "--threads", "1", "--log", log]) == 0
    assert torch.get_num_threads() == 1
    out = capsys.readouterr().out
    assert len([line for line in out.splitlines() if line.startswith("step ") and "tokens/s" in line]) == 3
    rows = open(log).read().splitlines()
    assert rows[0] == "step,loss,tokens_per_s,seconds" and len(rows) == 4
    assert all(float(r.split(",")[2]) > 0 for r in rows[1:])


def test_local_hf_tokenizer(tiny1, tmp_path, capsys):
    """A tokenizer from a local path (a word-level one built here: nothing is downloaded)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    words = "the a cat dog sat on mat".split()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(str(tmp_path / "tok"))
    text = tmp_path / "text.txt"
    text.write_text(" ".join(words[i % 7] for i in range(400)))
    art = tiny1
    assert main(["train", art, "--steps", "2", "--data", str(text), "--tokenizer", str(tmp_path / "tok")]) == 0
    assert main(["train", art, "--steps", "1", "--tokenizer", str(tmp_path / "no-such-tokenizer")]) == 2
    assert "autospc: error: tokenizer" in capsys.readouterr().err


def test_datasets_directory(tiny1, tmp_path):
    pytest.importorskip("datasets", reason="`datasets` is not installed: the datasets-directory path is untested")
    import datasets
    datasets.Dataset.from_dict({"input_ids": [[1, 2, 3, 4] * 20] * 4}).save_to_disk(str(tmp_path / "ds"))
    assert main(["train", tiny1, "--steps", "1", "--data", str(tmp_path / "ds")]) == 0
