"""autospc plan and remat="auto": memory answers from the prediction, checked against measured runs."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch

import autosp
from autosp.frontend import CompileError, load_model
from autosp.planner import longest_sequence, optimizer_state_bytes
from test_memory import _measure

MiB = 2 ** 20


def test_longest_sequence_matches_measured_runs(tmp_path):
    budget = 16 * MiB
    fits = {f.policy: f for f in longest_sequence(load_model("builtin:tiny-llama", empty=True), sp=1,
                                                 memory=budget, batch=2)}
    assert set(fits) == {"none", "sac", "full", "auto"}
    # auto's plans run from none to the full base: it fits as far as the leanest named policy
    assert fits["auto"].seq_len == max(fits[p].seq_len for p in ("none", "sac", "full")) > 0
    for policy in ("none", "sac"):
        s = fits[policy].seq_len
        assert s > 0 and fits[policy].predicted_peak_bytes <= budget
        ids = torch.zeros(2, s, dtype=torch.long)
        model = load_model("builtin:tiny-llama", empty=True)
        path = str(tmp_path / f"{policy}.autosp")
        art = autosp.compile(model, (ids, ids), sp=1, remat=policy)
        art.save(path)
        predicted = json.loads(art.files["plan.json"])["memory"]["predicted_peak_bytes"]
        assert abs(predicted - fits[policy].predicted_peak_bytes) <= 0.02 * budget   # the line is right
        measured = _measure(path)
        assert measured <= 1.10 * budget, (policy, s, measured)                     # and it does fit
        longer = torch.zeros(2, s + 64, dtype=torch.long)
        over = json.loads(autosp.compile(model, (longer, longer), sp=1, remat=policy).files["plan.json"])
        assert over["memory"]["predicted_peak_bytes"] > budget                       # the longest one


def test_auto_takes_least_recompute_that_fits():
    ids = torch.zeros(2, 512, dtype=torch.long)
    model = load_model("builtin:tiny-llama", empty=True)

    def plan_for(budget) -> dict:
        return json.loads(autosp.compile(model, (ids, ids), sp=1, remat="auto", memory_budget=budget)
                          .files["plan.json"])

    big = plan_for("1GiB")
    assert big["remat"] == "auto" and big["auto"]["chosen"] == "none"
    plans = big["auto"]["plans"]
    assert set(plans) == {"none"} and plans["none"]["recompute_flops"] == 0
    # a budget that none misses and the named policies meet: a per-value plan in between
    tight = json.loads(autosp.compile(model, (ids, ids), sp=1, remat="sac").files["plan.json"])
    squeeze = (plans["none"]["predicted_peak_bytes"] + tight["memory"]["predicted_peak_bytes"]) // 2
    plan = plan_for(squeeze)
    auto = plan["auto"]
    chosen = auto["plans"][auto["chosen"]]
    assert "+" in auto["chosen"] and auto["budget_bytes"] == squeeze, auto["chosen"]
    assert chosen["predicted_peak_bytes"] == plan["memory"]["predicted_peak_bytes"] <= squeeze
    fitting = [p for n, p in auto["plans"].items() if p["predicted_peak_bytes"] <= squeeze and n != auto["chosen"]]
    assert fitting and all(chosen["recompute_ns"] <= p["recompute_ns"] for p in fitting), auto["plans"]
    assert chosen["recompute_ns"] < auto["plans"]["sac"]["recompute_ns"]
    with pytest.raises(CompileError, match=r"no remat plan fits the budget 2\.0 MiB: the smallest predicted peak "
                                           r"is \d+\.\d MiB per rank \(policy \w+\), dominated by \w+"):
        plan_for("2MiB")
    with pytest.raises(CompileError, match=r"remat='auto' needs a memory_budget"):
        autosp.compile(model, (ids, ids), sp=1, remat="auto")
    # a reserve is held out of the budget: 64 KiB more budget and a 64 KiB reserve plan as the squeeze did
    held = json.loads(autosp.compile(model, (ids, ids), sp=1, remat="auto", memory_budget=squeeze + 2**16,
                                     reserve="64KiB").files["plan.json"])
    assert (held["auto"]["budget_bytes"], held["auto"]["chosen"]) == (squeeze, auto["chosen"])
    with pytest.raises(CompileError, match=r"^error: memory_budget 1\.0 MiB leaves nothing for the step beside reserve "
                                           r"2\.0 MiB$"):
        autosp.compile(model, (ids, ids), sp=1, remat="auto", memory_budget="1MiB", reserve="2MiB")


def test_training_peak_counts_optimizer_states():
    """Training holds AdamW's states through the step: the longest S shrinks by what they take, and
    the answer's peak is the step's own predicted peak at that length plus the states."""
    budget = 16 * MiB
    model = load_model("builtin:tiny-llama", empty=True)
    states = {"": 0, "AdamW": optimizer_state_bytes(model), "ZeRO-1": optimizer_state_bytes(model, ranks=4)}
    assert states["AdamW"] == 2 * 4 * sum(p.numel() for p in model.parameters())     # 2 fp32 per parameter
    fits = {f.optimizer: f for f in longest_sequence(model, sp=1, memory=budget, batch=2, policies=("sac",),
                                                     optimizers=states)}
    assert fits[""].seq_len > fits["ZeRO-1"].seq_len > fits["AdamW"].seq_len > 0
    for name, f in fits.items():
        assert f.breakdown["optimizer"] == states[name] and f.predicted_peak_bytes <= budget
    s = fits["AdamW"].seq_len
    ids = torch.zeros(2, s, dtype=torch.long)
    step = json.loads(autosp.compile(model, (ids, ids), sp=1, remat="sac").files["plan.json"])["memory"]
    assert abs(step["predicted_peak_bytes"] + states["AdamW"] - fits["AdamW"].predicted_peak_bytes) <= 0.02 * budget


def test_plan_cli():
    r = subprocess.run(["autospc", "plan", "builtin:tiny-llama", "--sp", "2", "--batch", "2", "--memory", "25MiB",
                        "--reserve", "1MiB"], capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert "within 24.0 MiB per rank (25.0 MiB less a 1.0 MiB reserve)" in r.stdout.splitlines()[0]
    assert "sharded over the 2 ranks by ZeroRedundancyOptimizer (ZeRO-1)" in r.stdout.splitlines()[0]
    rows = [line.split() for line in r.stdout.splitlines()[2:]]
    # policy, optimizer, states (value unit), seq_len, peak (value unit), limited by ...
    pairs = [(p, o) for p in ("none", "sac", "full") for o in ("AdamW", "ZeRO-1")]
    assert [(row[0], row[1]) for row in rows] == pairs + [("auto", "AdamW"), ("auto", "ZeRO-1")]
    assert all(int(row[4].replace(",", "")) % 2 == 0 and "limited" in " ".join(row) for row in rows)
    from autosp.units import human
    model = load_model("builtin:tiny-llama", empty=True)
    for adamw, zero in zip(rows[::2], rows[1::2]):
        assert " ".join(adamw[2:4]) == human(optimizer_state_bytes(model))
        assert " ".join(zero[2:4]) == human(optimizer_state_bytes(model, ranks=2))
        assert int(zero[4].replace(",", "")) >= int(adamw[4].replace(",", ""))
    # auto fits as far as the longest named policy, per optimizer
    for auto, opt in zip(rows[6:], ("AdamW", "ZeRO-1")):
        assert auto[4] == max((row for row in rows[:6] if row[1] == opt), key=lambda row: int(row[4].replace(",", "")))[4]
