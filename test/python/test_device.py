"""Device-neutral artifacts: the compiled step (forward and backward) of every tested model runs with
its parameters, buffers and inputs on the `meta` device. Any tensor the program makes on the
capture's device (a factory op or a copy naming `cpu`) meets a meta tensor and is caught by a
dispatch mode that checks the device of every operand and result."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import autosp
from autosp.frontend import load_model
from conftest import HF_CONFIGS, spec_for

MODELS = ["builtin:tiny-llama", *HF_CONFIGS, "py:models:dropout_model"]


class _OnlyMeta(TorchDispatchMode):
    """Raises on any op that reads or makes a tensor off the meta device (ATen lets a 0-dim CPU
    tensor, and some CPU kernels a CPU operand, mix with meta tensors)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten((args, kwargs, out))[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                raise AssertionError(f"{func} touches a tensor on {t.device}")
        return out


@pytest.mark.parametrize("name", MODELS)
def test_step_runs_on_meta(name, hf_dir, tmp_path):
    spec = spec_for(name, hf_dir)
    ids = torch.zeros(1, 16, dtype=torch.long)
    art = autosp.compile(load_model(spec, empty=True), (ids, ids), sp=1, model_name=spec)
    assert '"cpu"' not in art.files["program.json"].decode()
    m = autosp.load(art.save(str(tmp_path / "m.autosp"))).to("meta")
    ids = ids.to("meta")
    with _OnlyMeta():
        loss = m(ids, ids)
        loss.backward()
    assert loss.device.type == "meta"
    assert all(p.grad is not None and p.grad.device.type == "meta" for p in m.parameters() if p.requires_grad)
