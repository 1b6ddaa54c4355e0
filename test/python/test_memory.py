"""sp-plan-memory: the predicted per-rank peak against what the runtime measures, and how it is shown."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import torch

import autosp
from autosp.frontend import CompileError, load_model
from autosp.verify import batch_for


def _measure(path: str, steps: int = 2) -> int:
    m = autosp.load(path)
    m.load_state_dict(load_model("builtin:tiny-llama").state_dict())
    m.measure_memory = True
    for step in range(steps):
        m.zero_grad()
        ids, labels = batch_for(256, m.input_shape, seed=step)
        m(ids, labels).backward()
    return m.peak_bytes


def _predicted(path: str) -> int:
    return json.load(open(os.path.join(path, "plan.json")))["memory"]["predicted_peak_bytes"]


@pytest.mark.parametrize("remat", ["none", "sac", "full"])
@pytest.mark.parametrize("seq", [128, 512, 1024])
def test_prediction_within_10_percent(remat, seq, compile_to):
    path = compile_to("builtin:tiny-llama", 1, seq=seq, remat=remat)
    measured, predicted = _measure(path), _predicted(path)
    assert abs(predicted - measured) <= 0.10 * measured, (predicted, measured)


def test_prediction_bf16(compile_to):
    """Mixed precision: every value is counted at its dtype (bf16 matmul outputs and saved attention,
    fp32 residual stream and gradients)."""
    path = compile_to("builtin:tiny-llama", 1, seq=512, precision="bf16")
    saved = json.load(open(os.path.join(path, "plan.json")))["saved"]
    assert {"bfloat16", "float32"} <= {s["dtype"] for s in saved}
    measured, predicted = _measure(path), _predicted(path)
    assert abs(predicted - measured) <= 0.10 * measured, (predicted, measured)


@pytest.mark.parametrize("remat", ["none", "sac", "full"])
def test_prediction_on_two_ranks(remat, compile_to):
    from autosp.launch import spawn
    path = compile_to("builtin:tiny-llama", 2, seq=512, remat=remat)
    measured = spawn(2, _measure, path)
    for m in measured:
        assert abs(_predicted(path) - m) <= 0.10 * m, (_predicted(path), measured)


def test_budget_error_names_the_breakdown():
    ids = torch.zeros(2, 256, dtype=torch.long)
    with pytest.raises(CompileError, match=r"predicted peak (\d+\.\d) MiB per rank exceeds the budget 1\.0 MiB "
                                           r"\(parameters 417\.3 KiB, gradients .*, inputs .*saved .*transient") as e:
        autosp.compile(load_model("builtin:tiny-llama", empty=True), (ids, ids), sp=1, memory_budget="1MiB")
    # the parts add up to the peak (each printed to 0.1 of its unit)
    unit = {"B": 1, "KiB": 2**10, "MiB": 2**20}
    msg = str(e.value)
    parts = re.findall(r"(\w+) (\d+(?:\.\d)?) (B|KiB|MiB)\b", msg[msg.index("(parameters"):])
    assert [k for k, _, _ in parts] == ["parameters", "gradients", "inputs", "saved", "transient", "comm"]
    peak = float(re.search(r"predicted peak (\d+\.\d) MiB", msg).group(1)) * 2**20
    rounding = 0.05 * 2**20 + sum(0.05 * unit[u] for _, _, u in parts)
    assert abs(sum(float(n) * unit[u] for _, n, u in parts) - peak) <= rounding, msg


def test_inspect_json_and_plot(compile_to, tmp_path):
    path = compile_to("builtin:tiny-llama", 2, seq=64)
    out = subprocess.run(["autospc", "inspect", path, "--json"], capture_output=True, text=True, check=True).stdout
    info = json.loads(out)
    assert info["predicted_peak_bytes"] == _predicted(path)
    assert set(info["breakdown"]) == {"parameters", "inputs", "saved", "gradients", "transient", "comm"}
    assert sum(info["breakdown"].values()) == info["predicted_peak_bytes"]
    # what is recomputed and tiled: sac recomputes the projections; nothing is tiled, as the widest
    # token-local values ([64, 256] fp32 logits, 64 KiB) are far below sp-tile-sequence's floor
    assert info["recomputed"]["ops"] > 0 and info["recomputed"]["flops"] > 0
    assert info["tiled"] == []
    png = tmp_path / "timeline.png"
    text = subprocess.run(["autospc", "inspect", path, "--plot", str(png)], capture_output=True, text=True,
                          check=True).stdout
    assert "predicted peak" in text and png.read_bytes().startswith(b"\x89PNG")


def test_plan_knows_every_aliasing_op():
    """Every ATen op the runtime runs whose result may be its operand's storage (an alias in its
    schema) is one sp-plan-memory shares storage for: otherwise it would count a buffer that is not
    there, and could mark an all-reduce in place over a storage another value still reads."""
    from autosp.passes.ops import A, SAME_DTYPE_VIEWS, VIEWS
    from autosp.runtime.artifact import ALLOWED_ATEN, resolve

    def aliasing(qualified: str) -> bool:
        return any(r.alias_info is not None and not r.alias_info.is_write
                   for r in resolve(qualified)._schema.returns)

    def ir_name(qualified: str) -> str:   # aten.view.default -> torch.aten.view
        ns, name, overload = qualified.split(".")
        return f"torch.{ns}.{name}" + ("" if overload == "default" else f".{overload}")
    found = {ir_name(q) for q in ALLOWED_ATEN if aliasing(q)}
    assert found and found <= VIEWS | SAME_DTYPE_VIEWS, sorted(found - VIEWS - SAME_DTYPE_VIEWS)
    assert A + "to.dtype" in found
