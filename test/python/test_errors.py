"""Bad input gets a clear error naming the numbers (and the source line), never a wrong result."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess

import pytest
import torch

import autosp
from autosp.frontend import CompileError, load_model
from autosp.runtime import ArtifactError, IntegrityError
from autosp.runtime.artifact import FORMAT_VERSION

MODELS_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models.py")


def _compile(spec: str, sp: int, seq: int = 16, batch: int = 2, **options):
    ids = torch.zeros(batch, seq, dtype=torch.long)
    return autosp.compile(load_model(spec, empty=True), (ids, ids), sp=sp, **options)


def test_uneven_length_refused_where_padding_changes_the_result():
    """18 tokens on 4 ranks are padded to 24, which only causal attention cannot see."""
    with pytest.raises(CompileError, match=r"18 tokens are padded to 24 for equal shards, which is exact only if every "
                                           r"attention is causal \(this one is not\)") as e:
        _compile("py:models:full_attention", sp=4, seq=18)
    from autosp.frontend import tiny_llama
    with open(tiny_llama.__file__) as f:
        line = next(i for i, text in enumerate(f, 1) if "F.scaled_dot_product_attention" in text)
    assert f"tiny_llama.py:{line}" in str(e.value)


def test_uneven_length_padded_past_the_positions(hf_dir):
    """GPT-2's 64 learned positions: 62 tokens cannot be padded to 66 for sp=3."""
    with pytest.raises(CompileError, match=r"sequence length 62 is not divisible by sp=3, and padding it to 66 tokens "
                                           r"exceeds the model's 64 positions; use a length divisible by 3 \(e.g. 60\)"):
        _compile(f"hf:{hf_dir('gpt2')}", sp=3, seq=62)


def test_heads_not_divisible_and_the_command_that_reproduces_it():
    """Ulysses asked for where it cannot split the heads (auto would take the ring)."""
    with pytest.raises(CompileError, match=r"attention has 4 heads, which sp=8 does not divide .*attention=ring") as e:
        _compile("builtin:tiny-llama", sp=8, seq=16, attention="ulysses")
    # the sp stage failed: autosp-opt on the IR it was given fails the same way
    cmd = e.value.reproduce
    assert cmd.startswith("autosp-opt ") and "sp-pipeline{sp=8 attention=ulysses}" in cmd and cmd in "".join(e.value.__notes__)
    r = subprocess.run(shlex.split(cmd), capture_output=True, text=True)
    assert r.returncode == 1 and "attention has 4 heads, which sp=8 does not divide" in r.stderr, r.stderr
    os.remove(shlex.split(cmd)[1])


def _line_of(text: str) -> int:
    with open(MODELS_PY) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


def test_attention_not_through_sdpa_names_module_and_line():
    with pytest.raises(CompileError) as e:
        _compile("py:models:manual_attention", sp=2)
    msg = str(e.value)
    assert f"models.py:{_line_of('scores = q @ k.transpose')}" in msg
    assert "ManualAttention" in msg and "scaled_dot_product_attention" in msg and "[16 x 16]" in msg


def test_unsupported_op_names_op_and_line():
    with pytest.raises(CompileError) as e:
        _compile("py:models:cumsum_model", sp=2)
    msg = str(e.value)
    assert "unsupported op aten.cumsum.default" in msg
    assert f"models.py:{_line_of('.cumsum(dim=-1)')}" in msg


def test_explicit_mask_rejected():
    with pytest.raises(CompileError, match=r"models.py:\d+.*explicit attn_mask is not supported"):
        _compile("py:models:masked_attention", sp=2)


def test_attention_dropout_rejected():
    with pytest.raises(CompileError, match=r"dropout_p=0.1 is not supported"):
        _compile("py:models:dropout_attention", sp=2)


def test_bad_example_inputs():
    with pytest.raises(CompileError, match=r"\[batch, seq\], got \[2, 16\] and \[2, 8\]"):
        autosp.compile(load_model("builtin:tiny-llama", empty=True),
                       (torch.zeros(2, 16, dtype=torch.long), torch.zeros(2, 8, dtype=torch.long)), sp=2)


# ---------------------------------------------------------------------------------- artifacts
@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("art") / "m.autosp")
    _compile("builtin:tiny-llama", sp=1).save(path)
    return path


def _copy(src: str, tmp_path) -> str:
    dst = str(tmp_path / "copy.autosp")
    shutil.copytree(src, dst)
    return dst


def test_corrupted_file_named(artifact, tmp_path):
    path = _copy(artifact, tmp_path)
    prog = os.path.join(path, "program.json")
    data = bytearray(open(prog, "rb").read())
    data[100] ^= 1
    open(prog, "wb").write(bytes(data))
    with pytest.raises(IntegrityError, match=r"program.json: sha256 mismatch"):
        autosp.load(path)


def test_truncated_file_named(artifact, tmp_path):
    path = _copy(artifact, tmp_path)
    buf = os.path.join(path, "params.json")
    data = open(buf, "rb").read()
    open(buf, "wb").write(data[: len(data) // 2])
    with pytest.raises(IntegrityError, match=r"params.json: truncated"):
        autosp.load(path)


def test_missing_file_named(artifact, tmp_path):
    path = _copy(artifact, tmp_path)
    os.remove(os.path.join(path, "program.mlir"))
    with pytest.raises(IntegrityError, match=r"program.mlir: file listed in the manifest is missing"):
        autosp.load(path)


def test_newer_format_version(artifact, tmp_path):
    path = _copy(artifact, tmp_path)
    man = os.path.join(path, "manifest.json")
    meta = json.load(open(man))
    meta["format_version"] = 99
    json.dump(meta, open(man, "w"))
    with pytest.raises(ArtifactError, match=rf"format version 99 is newer than this runtime supports \({FORMAT_VERSION}\)"):
        autosp.load(path)


def test_op_outside_allowlist_refused(artifact, tmp_path):
    """A program naming an op the runtime does not allow is refused at load (manifest re-signed)."""
    from autosp.runtime import artifact as schema
    path = _copy(artifact, tmp_path)
    prog = json.loads(open(os.path.join(path, "program.json")).read())
    prog["programs"]["forward"]["instructions"][5]["op"] = "aten.cumsum.default"
    files = {rel: open(os.path.join(path, rel), "rb").read() for rel in json.load(open(os.path.join(path, "manifest.json")))["files"]}
    files["program.json"] = json.dumps(prog).encode()
    meta = {k: v for k, v in json.load(open(os.path.join(path, "manifest.json"))).items()
            if k not in ("files", "format_version", "layout")}
    schema.write(path, files, meta)
    with pytest.raises(ArtifactError, match=r"'aten.cumsum.default', which is not in the runtime's op allowlist"):
        autosp.load(path)


def test_wrong_input_shape(artifact):
    m = autosp.load(artifact)
    with pytest.raises(ValueError, match=r"compiled for input_ids and labels of shape \[2, 16\], got \[2, 8\]"):
        m(torch.zeros(2, 8, dtype=torch.long), torch.zeros(2, 8, dtype=torch.long))


def _fail_attention(monkeypatch, error: Exception) -> None:
    """The attention kernel fails as an allocation would (the executor looks it up at every call)."""
    from autosp.runtime import kernels

    def fail(*args, **kwargs):
        raise error
    monkeypatch.setattr(kernels, "attention", fail)


def _attention_line() -> str:
    from autosp.frontend import tiny_llama
    with open(tiny_llama.__file__) as f:
        line = next(i for i, text in enumerate(f, 1) if "scaled_dot_product_attention(" in text)
    return f"{tiny_llama.__file__}:{line}"


def test_out_of_memory_stays_catchable(artifact, monkeypatch):
    """A CUDA OOM inside a step is torch.OutOfMemoryError (backing off with `except` works), with the
    instruction and the model line added; provoked on CPU by a fake allocation failure."""
    m = autosp.load(artifact)
    _fail_attention(monkeypatch, torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    ids = torch.zeros(2, 16, dtype=torch.long)
    with pytest.raises(torch.OutOfMemoryError) as e:
        m(ids, ids)
    assert not isinstance(e.value, autosp.runtime.executor.ProgramError)
    assert re.fullmatch(rf"instruction \d+ \(sp\.attention, {re.escape(_attention_line())}\): "
                        r"CUDA out of memory\. Tried to allocate 2\.00 GiB", str(e.value)), str(e.value)


def test_other_step_failure_is_program_error(artifact, monkeypatch):
    """In the first run (interpreted, checked) and in a later one (the generated code, executor._Straight)
    alike: the instruction, its model line and the cause."""
    from autosp.runtime.executor import ProgramError
    ids = torch.zeros(2, 16, dtype=torch.long)
    warm = autosp.load(artifact)
    warm(ids, ids)
    messages = []
    for m in (autosp.load(artifact), warm):
        with monkeypatch.context() as patch:
            _fail_attention(patch, RuntimeError("kernel launch failed"))
            with pytest.raises(ProgramError, match=rf"instruction \d+ \(sp\.attention, "
                                                   rf"{re.escape(_attention_line())}\): kernel launch failed$") as e:
                m(ids, ids)
        messages.append(str(e.value))
    assert warm.forward_program._straight is not None and messages[0] == messages[1], messages


def test_sp_artifact_without_process_group(tmp_path):
    path = str(tmp_path / "sp2.autosp")
    _compile("builtin:tiny-llama", sp=2).save(path)
    with pytest.raises(ArtifactError, match=r"compiled for sp=2 x dp=1 = 2 ranks; initialize a process group"):
        autosp.load(path)


def _load_in_group(path: str) -> str:
    try:
        autosp.load(path)
    except ArtifactError as e:
        return str(e)
    return "loaded"


def test_wrong_world_size(tmp_path):
    from autosp.launch import spawn
    path = str(tmp_path / "sp2.autosp")
    _compile("builtin:tiny-llama", sp=2).save(path)
    msgs = spawn(3, _load_in_group, path)
    assert all("compiled for sp=2 x dp=1 = 2 ranks, but the process group has 3" in m for m in msgs), msgs


def test_labels_all_ignored_warn_once_and_match_eager_nan(artifact):
    """A batch with no counted label: a loss over zero tokens, NaN as in eager, and one warning."""
    import warnings
    m = autosp.load(artifact)
    eager_model = load_model("builtin:tiny-llama")
    m.load_state_dict(eager_model.state_dict())
    ids = torch.zeros(2, 16, dtype=torch.long)
    labels = torch.full((2, 16), -100)
    with pytest.warns(RuntimeWarning, match=r"every label is -100 \(ignore_index\): the loss is a mean over "
                                            r"zero tokens"):
        loss = m(ids, labels)
    eager = eager_model(ids, labels)
    eager = getattr(eager, "loss", eager)
    assert torch.isnan(loss) and torch.isnan(eager)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.isnan(m(ids, labels))            # once
