"""autospc plan and remat="auto": memory answers from the prediction, checked against measured runs."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch

import autosp
from autosp.frontend import CompileError, load_model
from autosp.planner import longest_sequence
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


def test_plan_cli():
    r = subprocess.run(["autospc", "plan", "builtin:tiny-llama", "--sp", "2", "--batch", "2", "--memory", "24MiB"],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()[2:]]
    assert [row[0] for row in rows] == ["none", "sac", "full", "auto"]
    assert all(int(row[1].replace(",", "")) % 2 == 0 and "limited" in " ".join(row) for row in rows)
    assert rows[3][1] == max(rows[:3], key=lambda row: int(row[1].replace(",", "")))[1]
