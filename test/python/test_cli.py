"""autospc end to end: compile, inspect, verify, train (spawned ranks and torchrun), demo."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=600)
    if ok:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("cli") / "tiny.autosp")
    r = run("autospc", "compile", "builtin:tiny-llama", "--seq-len", "32", "--batch", "2", "--sp", "2", "--tile", "2",
            "-o", out)
    assert "wrote" in r.stdout
    return out


def test_inspect(art):
    r = run("autospc", "inspect", art)
    assert "sp=2 x dp=1" in r.stdout and "106,816 parameters" in r.stdout
    # q/k/v and dq/dk,dv re-shards packed (sp-coalesce-collectives): 4 per layer, 2 layers
    assert re.search(r"sp\.all_to_all\s+x8\s+[\d.]+ KiB", r.stdout), r.stdout
    assert re.search(r"sp\.all_reduce\s+x2\s+[\d.]+ KiB", r.stdout), r.stdout
    # the label shift reads the replicated labels (sp-elide-halo): no exchange
    assert "sp.halo" not in r.stdout and "sp-partition-sequence{sp=2 dp=1 attention=auto}" in r.stdout
    assert "attention    ulysses: all-to-alls split the heads over 2 ranks" in r.stdout, r.stdout
    assert "on CUDA: the memory-efficient kernel for 2 attention ops" in r.stdout, r.stdout   # fp32
    assert re.search(r"bytes per rank per step: ulysses 2 [\d.]+ KiB, ring 2 [\d.]+ KiB", r.stdout), r.stdout
    # the plan: saved, recomputed, tiled (32 local tokens; --tile 2: the head V=256 and the MLPs F=128 in 2)
    assert re.search(r"remat\s+sac: the forward saves \d+ tensors, [\d.]+ KiB per rank for the backward; "
                     r"it recomputes \d+ ops \([\d.]+ MFLOP\)", r.stdout), r.stdout
    assert "LM head + loss in 2 chunks: [32, 256] never whole (lm_head)" in r.stdout
    assert "2 MLPs in 2 chunks: [32, 128] never whole (model.layers.0.mlp, model.layers.1.mlp)" in r.stdout


def test_verify_pass(art):
    r = run("autospc", "verify", art, "--nproc", "2")
    assert "PASS" in r.stdout and re.search(r"rel err \d\.\d\de[-+]\d\d", r.stdout)


def test_verify_fails_on_wrong_weights(art):
    """verify must catch a mismatch: compare against a model of other weights (another seed)."""
    r = run("autospc", "verify", art, "--nproc", "2", "--model", "py:models:tiny_llama_tied", ok=False)
    assert r.returncode != 0


def test_train_spawned(art):
    r = run("autospc", "train", art, "--nproc", "2", "--steps", "6")
    losses = [float(x) for x in re.findall(r"step\s+\d+/6\s+loss (\d+\.\d+)", r.stdout)]
    assert len(losses) == 6 and losses[-1] < losses[0]
    # ZeRO-1: AdamW's states sharded over the 2 ranks, the same steps (bit-identical: test_zero.py)
    z = run("autospc", "train", art, "--nproc", "2", "--steps", "6", "--zero")
    assert re.findall(r"step\s+\d+/6\s+loss (\d+\.\d+)", z.stdout) == [f"{x:.4f}" for x in losses]


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not on PATH")
def test_train_under_torchrun(art):
    r = run("torchrun", "--nproc-per-node", "2", "--master-port", "29517", "-m", "autosp.cli.autospc",
            "train", art, "--steps", "3")
    assert len(re.findall(r"step\s+\d+/3\s+loss", r.stdout)) == 3


def test_compile_error_exit_code(tmp_path):
    r = run("autospc", "compile", "builtin:tiny-llama", "--seq-len", "32", "--sp", "8", "--attention", "ulysses",
            "-o", str(tmp_path / "x.autosp"), ok=False)
    assert r.returncode == 2 and "attention has 4 heads, which sp=8 does not divide" in r.stderr


def test_demo():
    r = run("autospc", "demo", "--steps", "8")
    m = re.search(r"loss (\d+\.\d+) -> (\d+\.\d+)", r.stdout)
    assert m and float(m.group(2)) < float(m.group(1)) - 0.5, r.stdout


# ------------------------------------------------------------------ one line for every user error
def _one_error_line(err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("autospc: error: "), err
    for n in needles:
        assert n in lines[0], (n, err)


@pytest.mark.parametrize("argv,needle", [
    (["--seq-len", "0"], "argument --seq-len: must be >= 1, got 0"),
    (["--seq-len", "-8"], "argument --seq-len: must be >= 1, got -8"),
    (["--seq-len", "16", "--batch", "0"], "argument --batch: must be >= 1, got 0"),
    (["--seq-len", "16", "--batch", "-1"], "argument --batch: must be >= 1, got -1"),
    (["--seq-len", "16", "--memory-budget", "abc"], "cannot read 'abc' as a size"),
])
def test_argument_errors_one_line(argv, needle, capsys):
    from autosp.cli.autospc import main
    with pytest.raises(SystemExit) as e:
        main(["compile", "builtin:tiny-llama", *argv, "-o", "unused"])
    assert e.value.code == 2
    _one_error_line(capsys.readouterr().err, needle)


def test_model_errors_one_line(hf_dir, tmp_path, capsys):
    from autosp.cli.autospc import main
    bad = tmp_path / "foobar"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "foobar", "vocab_size": 64}')
    gemma2 = tmp_path / "gemma2"
    gemma2.mkdir()
    (gemma2 / "config.json").write_text(json.dumps(dict(model_type="gemma2", architectures=["Gemma2ForCausalLM"],
                                                        vocab_size=96, hidden_size=32, num_hidden_layers=1,
                                                        num_attention_heads=4, num_key_value_heads=2, head_dim=8)))
    cases = [("builtin:tiny-llama", "1", "needs batch >= 1 and seq_len >= 2", "got batch=1, seq_len=1"),
             ("py:no_such_module:fn", "16", "py:no_such_module:fn: cannot import module 'no_such_module'", ""),
             (f"hf:{bad}", "16", "model_type 'foobar'", "does not recognize this architecture"),
             (f"hf:{gemma2}", "16", "refuses to build this gemma2 model (Gemma2ForCausalLM)",
              "does not support an attention implementation through torch.nn.functional.scaled_dot_product_attention")]
    for spec, seq, *needles in cases:
        assert main(["compile", spec, "--seq-len", seq, "-o", str(tmp_path / "x")]) == 2
        _one_error_line(capsys.readouterr().err, *needles)
    # an hf: source is built with dtype=, so transformers prints no torch_dtype deprecation
    from autosp.frontend import load_model
    load_model(f"hf:{hf_dir('llama')}", empty=True)
    assert "torch_dtype" not in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["train", "verify"])
def test_wrong_world_size_one_line(art, cmd):
    r = run("autospc", cmd, art, "--nproc", "3", "--steps", "1", ok=False)
    assert r.returncode == 2
    _one_error_line(r.stderr, "rank 0: the artifact was compiled for sp=2 x dp=1 = 2 ranks, but the process "
                              "group has 3")


def test_wrong_world_size_under_torchrun(art):
    r = run(sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "3", "--master-port", "29519",
            "-m", "autosp.cli.autospc",
            "train", art, "--steps", "1", ok=False)
    assert r.returncode != 0 and 'autospc.py", line' not in r.stderr   # torchrun's own summary follows ours
    # one line from each rank (their writes may interleave)
    assert r.stderr.count("autospc: error: the artifact was compiled for sp=2 x dp=1 = 2 ranks, but the process "
                          "group has 3") == 3, r.stderr


def test_killed_rank_named_with_its_signal(art):
    """SIGKILL one of `autospc train`'s ranks: one line naming the rank, its pid and the signal; no
    leaked-semaphore warning."""
    import signal
    import time
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")
    p = subprocess.Popen(["autospc", "train", art, "--nproc", "2", "--steps", "100000"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    assert "step" in p.stdout.readline()          # both ranks are training
    ranks = []
    for child in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split():
        if "spawn_main" in open(f"/proc/{child}/cmdline").read():
            ranks.append(int(child))
    assert len(ranks) == 2, ranks
    os.kill(ranks[1], signal.SIGKILL)
    t = time.monotonic()
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and time.monotonic() - t < 30
    assert "leaked" not in err
    _one_error_line(err, f"(pid {ranks[1]}) was killed by SIGKILL")


def test_every_help_describes_every_argument_with_its_default():
    import argparse

    from autosp.cli.autospc import _parser
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == {"compile", "plan", "inspect", "train", "verify", "demo"}
    for name, p in sub.choices.items():
        text = " ".join(p.format_help().split())
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, (name, action.dest)
            if action.default not in (None, False):
                assert f"(default: {action.default})" in text, (name, action.dest)
            elif action.default is None and action.option_strings and not action.required:
                assert "default" in action.help, (name, action.dest)
    assert "auto" in sub.choices["plan"].description
