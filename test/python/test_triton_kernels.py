"""Every fused kernel of the demo model (builtin:tiny-llama), forward and backward, generated as
Triton and run under Triton's interpreter on CPU, against the ATen ops it replaces (the runtime's
fallback), fp32 and bf16 (autocast); and each again with its results written into inputs of their
shape and dtype, as the runtime does where the memory plan says an input dies at the kernel: the
same bits (a block loads all it reads before it stores, only its own rows).

What the comparison can promise. Both sides compute every op in fp32; they differ only in (a) the
order of a row reduction's additions (a tree in tl.sum) and the libm each uses for exp / rsqrt /
sigmoid, each a few fp32 ulps, and (b) in bf16, rounding: ATen rounds every op's bf16 result (unit
roundoff u = 2^-8), the kernel only at its explicit casts and its stores. Errors of k rounded ops
add up to about k u of the values' scale (cancellation, as in RoPE's x cos + rot(x) sin, makes an
element's relative error unbounded, so the bound is normwise: against the output's largest
magnitude). Hence max |kernel - ATen| <= (ops + 1) * u * max |ATen|, u = 2^-24 x 16 (fp32: the
reductions' order) or 2^-8 (bf16). The bf16 program also holds fp32 kernels (norm statistics): each
kernel is held to the unit of the narrowest float it holds, its intermediates' included."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import autosp
from autosp.frontend.tiny_llama import TinyLlamaConfig, TinyLlamaForCausalLM
from autosp.runtime.artifact import DTYPES
from autosp.runtime.executor import Kernel

pytest.importorskip("triton")

UNIT = {"float32": 16 * 2.0 ** -24, "bfloat16": 2.0 ** -8}


def _inputs(kernel: dict, seed: int) -> list[torch.Tensor]:
    from autosp.lowering.triton_kernels import domain
    g = torch.Generator().manual_seed(seed)
    out = []
    for i, a in enumerate(kernel["args"]):
        dtype, shape = DTYPES[a["dtype"]], a["shape"]
        if dtype == torch.int64:   # the loss's targets: classes of the domain's last dim, some ignored (-100)
            t = torch.randint(-1, domain(kernel)[-1], shape, generator=g)
            out.append(t.masked_fill(t < 0, -100))
            continue
        if len(shape) >= 3 and (i + seed) % 2:   # every other operand a view, read through its strides:
            x = torch.randn([shape[1], shape[0]] + shape[2:-1] + [shape[-1] + 3], generator=g)   # rows apart,
            x = x.transpose(0, 1)[..., :shape[-1]]                                               # leading dims swapped
        else:
            x = torch.randn(shape, generator=g)
        out.append(x > 0 if dtype == torch.bool else x.to(dtype))
    return out


def check(kernels: dict[str, dict], folder: str) -> list[str]:
    """Run under TRITON_INTERPRET=1 (set before triton is imported: its library functions are
    defined for the interpreter then): what differs beyond the bound, one line each."""
    from autosp.lowering.triton_kernels import Unsupported, generate, launch, load
    bad = []
    for seed, (name, k) in enumerate(sorted(kernels.items())):
        try:
            tk = generate(name, k)
        except Unsupported as e:
            bad.append(f"{name}: no Triton ({e})")
            continue
        inputs = _inputs(k, seed)
        want = Kernel(k, None, name, limit=1 << 40)(*inputs)
        got = launch(load(tk, folder), tk, inputs, k["results"])
        ops = len(k["instructions"])
        # the narrowest float the kernel holds (an fp32 kernel may compute bf16 values in between)
        dtypes = [a["dtype"] for a in k["args"] + k["results"]] + [d for i in k["instructions"] for d in i["dtypes"]]
        unit = max(UNIT.get(d, 0.0) for d in dtypes)
        for j, (g, w) in enumerate(zip(got, want)):
            if g.shape != w.shape or g.dtype != w.dtype:
                bad.append(f"{name} result {j}: {list(g.shape)} {g.dtype}, ATen gives {list(w.shape)} {w.dtype}")
            elif w.dtype == torch.bool:
                if not torch.equal(g, w):
                    bad.append(f"{name} result {j}: masks differ")
            else:
                g64, w64 = g.double(), w.double()
                finite = w64[w64.isfinite()]
                scale = finite.abs().max().item() if finite.numel() else 1.0
                err = (g64 - w64).abs().nan_to_num(0.0).max().item()
                bound = (ops + 1) * unit * scale
                if not torch.equal(g64.isnan(), w64.isnan()) or err > bound:
                    bad.append(f"{name} result {j}: max error {err:.3g} > {bound:.3g} ({ops} ops, domain {tk.domain})")
        # written into a dying operand of its shape and dtype (sp-plan-memory's sp.in_place): the same bits
        into = _donors(inputs, k["results"])
        if any(d >= 0 for d in into):
            again = [x.clone() for x in inputs]
            written = launch(load(tk, folder), tk, again, k["results"], into)
            if any(w is not again[d] for w, d in zip(written, into) if d >= 0) or \
                    any(not torch.equal(w, g) for w, g in zip(written, got)):
                bad.append(f"{name}: written into operands {into}, the results differ")
    return bad


def _donors(inputs: list[torch.Tensor], results: list[dict]) -> list[int]:
    """Per result, a distinct contiguous input of its shape and dtype, or -1."""
    into: list[int] = []
    for r in results:
        k = next((i for i, x in enumerate(inputs) if i not in into and x.is_contiguous() and list(x.shape) == r["shape"]
                  and DTYPES[r["dtype"]] == x.dtype), -1)
        into.append(k)
    return into


@pytest.fixture(scope="module")
def programs():
    """The demo model's host program per precision (sp=2; tile=4, so the kernels of a tiled head and
    MLP are among them), compiled once for the module."""
    cache = {}

    def get(precision: str) -> dict:
        if precision not in cache:
            torch.manual_seed(0)
            ids = torch.zeros(1, 64, dtype=torch.long)
            cache[precision] = autosp.compile(TinyLlamaForCausalLM(TinyLlamaConfig()), (ids, ids), sp=2,
                                              precision=precision, tile=4).program
        return cache[precision]
    return get


def _interpret(kernels: dict, tmp_path) -> None:
    (tmp_path / "kernels.json").write_text(json.dumps(kernels))
    # a process of its own: TRITON_INTERPRET must be set before triton is first imported
    run = subprocess.run([sys.executable, __file__, str(tmp_path / "kernels.json"), str(tmp_path)],
                         env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == f"{len(kernels)} kernels checked", run.stdout[-3000:]


@pytest.mark.parametrize("precision,dtype", [("fp32", "float32"), ("bf16", "bfloat16")])
def test_every_kernel_matches_aten(programs, precision, dtype, tmp_path):
    kernels = {name: k for p in programs(precision)["programs"].values() for name, k in p.get("kernels", {}).items()}
    assert len(kernels) >= 40, f"{len(kernels)} kernels: sp-fuse found fewer regions than the demo has"
    assert any(a["dtype"] == dtype for k in kernels.values() for a in k["args"] + k["results"])
    _interpret(kernels, tmp_path)


@pytest.mark.parametrize("model", ["gemma", "phi3"])
def test_other_models_kernels_bf16(model, hf_dir, tmp_path):
    """Kernels the demo has not: gemma's tanh-approximate GELU and its backward, phi3's casts of RoPE's
    halves under autocast."""
    from autosp.frontend import load_model
    ids = torch.zeros(2, 16, dtype=torch.long)
    program = autosp.compile(load_model(f"hf:{hf_dir(model)}", empty=True), (ids, ids), sp=2, precision="bf16").program
    _interpret({n: k for p in program["programs"].values() for n, k in p["kernels"].items()}, tmp_path)


def test_generated_source_is_the_kernel(programs):
    """The forward's first RMSNorm kernel: one row reduction, rsqrt, blocks from the shapes; x [1, 32, 64]
    read through its leading dims' strides (arguments), the weight [64] along the unit-stride last dim."""
    from autosp.lowering.triton_kernels import generate
    kernels = programs("fp32")["programs"]["forward"]["kernels"]
    name = next(n for n, k in kernels.items() if any(i["op"] == "aten.mean.dim" for i in k["instructions"]))
    tk = generate(name, kernels[name])
    assert tk.domain == [1, 32, 64] and tk.block == (32, 64) and tk.grid == 1
    assert "tl.sum(" in tk.source and "tl.math.rsqrt(" in tk.source
    assert f"def {name}(in0, in1, out0, in0_s0, in0_s1):" in tk.source
    assert "tl.load(in0 + ((r // 1) % 32) * in0_s1 + c," in tk.source and "tl.load(in1 + c," in tk.source
    assert tk.signature == {"in0": "*fp32", "in1": "*fp32", "out0": "*fp32", "in0_s0": "i64", "in0_s1": "i64"}


if __name__ == "__main__":   # the interpreted half of test_every_kernel_matches_aten
    path, folder = sys.argv[1], sys.argv[2]
    kernels = json.loads(open(path).read())
    bad = check(kernels, folder)
    print("\n".join(bad) if bad else f"{len(kernels)} kernels checked")
