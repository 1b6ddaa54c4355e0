"""autospc: compile a model into a sequence-parallel training artifact, inspect it, train it,
verify it against eager.

  autospc compile builtin:tiny-llama --seq-len 256 --batch 2 --sp 2 -o m.autosp
  autospc inspect m.autosp [--json] [--plot timeline.png]
  autospc plan builtin:tiny-llama --sp 2 --memory 64MiB
  autospc train m.autosp --nproc 2 --steps 40        (or: torchrun --nproc-per-node 2 -m autosp.cli.autospc train m.autosp)
  autospc verify m.autosp --nproc 2
  autospc demo
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile


def _compile(spec: str, seq_len: int, batch: int, sp: int, dp: int, out: str, remat: str = "sac",
             memory_budget: str | None = None, tile: str | None = None, precision: str = "fp32") -> None:
    import torch

    import autosp
    from autosp.frontend.sources import load_model
    model = load_model(spec, empty=True)
    ids = torch.zeros(batch, seq_len, dtype=torch.long)
    print(f"compiling {spec} for [{batch}, {seq_len}] tokens, sp={sp} x dp={dp} ...", flush=True)
    art = autosp.compile(model, example_inputs=(ids, ids), sp=sp, dp=dp, remat=remat, memory_budget=memory_budget,
                         tile=int(tile) if tile and tile.isdigit() else tile, model_name=spec,
                         precision=precision)
    art.save(out)
    t = art.timings
    print(f"wrote {out}: {art.num_instructions} instructions; capture {t['capture']:.1f} s, "
          f"import {t['import']:.1f} s, passes {t['passes']:.1f} s, lower {t['lower']:.1f} s")


def _source(out: str, override: str | None) -> str:
    from autosp.runtime.artifact import read
    spec = override or read(out).manifest.get("model", "")
    if not spec.startswith(("builtin:", "hf:", "py:")):
        raise SystemExit(f"{out} does not name its source model; pass --model builtin:NAME | hf:PATH | py:mod:fn")
    return spec


def cmd_compile(a) -> int:
    _compile(a.model, a.seq_len, a.batch, a.sp, a.dp, a.output, a.remat, a.memory_budget, a.tile, a.precision)
    return 0


def cmd_inspect(a) -> int:
    import json

    from autosp.inspect_artifact import as_json, plot_timeline, report
    from autosp.runtime.artifact import read
    art = read(a.artifact)
    print(json.dumps(as_json(art), indent=1) if a.json else report(art))
    if a.plot:
        plot_timeline(art, a.plot)
        print(f"wrote {a.plot}", file=sys.stderr if a.json else sys.stdout)
    return 0


def cmd_plan(a) -> int:
    from autosp.frontend.sources import load_model
    from autosp.inspect_artifact import human
    from autosp.passes.sp_plan_memory import parse_bytes
    from autosp.planner import longest_sequence
    memory = parse_bytes(a.memory)
    fits = longest_sequence(load_model(a.model, empty=True), a.sp, memory, batch=a.batch, dp=a.dp,
                            tile=a.tile)
    print(f"{a.model}: the longest sequence per policy at batch {a.batch}, sp={a.sp}, within {human(memory)} "
          "per rank (predicted, nothing run)")
    print(f"{'policy':6s} {'seq_len':>10s} {'peak':>12s}")
    for f in fits:
        print(f.row())
    return 0


def cmd_train(a) -> int:
    from autosp.train import train
    train(a.artifact, _source(a.artifact, a.model), a.nproc, a.steps, a.lr, a.seed)
    return 0


def cmd_verify(a) -> int:
    from autosp.verify import verify
    reports = verify(a.artifact, _source(a.artifact, a.model), a.nproc, a.seed, a.steps)
    worst = max(reports, key=lambda r: max([r.loss_rel_err] + [e for _, e in r.worst]))
    print(f"loss: compiled {worst.loss:.8f}  eager {worst.eager_loss:.8f}  rel err {worst.loss_rel_err:.2e}")
    print(f"worst gradient errors (max |err| / max |grad|, over {len(reports)} ranks, {a.steps} step(s)):")
    for name, err in worst.worst[:a.top]:
        print(f"  {err:.2e}  {name}")
    ok = all(r.ok(a.tol) for r in reports)
    print(("PASS" if ok else "FAIL") + f": every rank within {a.tol:g}")
    return 0 if ok else 1


def cmd_demo(a) -> int:
    out = a.output or os.path.join(tempfile.mkdtemp(prefix="autosp-demo-"), "tiny-llama.autosp")
    _compile("builtin:tiny-llama", a.seq_len, a.batch, 2, 1, out)
    from autosp.inspect_artifact import report
    from autosp.runtime.artifact import read
    print(report(read(out)))
    from autosp.train import train
    losses = train(out, "builtin:tiny-llama", 2, a.steps, a.lr)
    if not losses[-1] < losses[0]:
        print(f"demo: loss did not fall ({losses[0]:.4f} -> {losses[-1]:.4f})", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="autospc", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile MODEL (builtin:NAME | hf:PATH | py:module:function)")
    c.add_argument("model")
    c.add_argument("--seq-len", type=int, required=True)
    c.add_argument("--batch", type=int, default=1)
    c.add_argument("--sp", type=int, default=1, help="sequence-parallel degree")
    c.add_argument("--dp", type=int, default=1, help="data-parallel degree (world = sp x dp)")
    c.add_argument("--remat", choices=["none", "full", "sac", "auto"], default="sac",
                   help="what the forward saves for the backward (default: sac, sequence-aware; auto: the "
                        "per-value plan with the least recompute that fits --memory-budget)")
    c.add_argument("--memory-budget", help="per-rank bytes or e.g. 12GiB; compiling fails above it")
    c.add_argument("--tile", default="auto", help="LM head + loss and MLPs in N token chunks, 'auto' (default) or 0 (off)")
    c.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="bf16 / fp16: the step as under torch.autocast, fp32 parameters and gradients (default: fp32)")
    c.add_argument("-o", "--output", required=True)
    c.set_defaults(fn=cmd_compile)
    pl = sub.add_parser("plan", help="the longest sequence that fits a memory size, per remat policy")
    pl.add_argument("model")
    pl.add_argument("--sp", type=int, default=1)
    pl.add_argument("--dp", type=int, default=1)
    pl.add_argument("--batch", type=int, default=1)
    pl.add_argument("--memory", required=True, help="per-rank memory, e.g. 80GiB")
    pl.add_argument("--tile", default="auto", help="LM head + loss and MLPs in N token chunks, 'auto' (default) or 0 (off)")
    pl.set_defaults(fn=cmd_plan)
    i = sub.add_parser("inspect", help="stages, collectives and bytes moved per step, parameters")
    i.add_argument("artifact")
    i.add_argument("--json", action="store_true", help="machine-readable (predicted_peak_bytes, breakdown, ...)")
    i.add_argument("--plot", metavar="FILE.png", help="draw the memory timeline of one step")
    i.set_defaults(fn=cmd_inspect)
    for name, fn, helptext in (("train", cmd_train, "train on CPU ranks on the shipped corpus"),
                               ("verify", cmd_verify, "compare loss and gradients with eager")):
        t = sub.add_parser(name, help=helptext)
        t.add_argument("artifact")
        t.add_argument("--nproc", type=int, default=1, help="CPU ranks to spawn (ignored under torchrun)")
        t.add_argument("--model", help="source model for the initial weights (default: the compiled one)")
        t.add_argument("--seed", type=int, default=0)
        if name == "train":
            t.add_argument("--steps", type=int, default=20)
            t.add_argument("--lr", type=float, default=3e-3)
        else:
            t.add_argument("--steps", type=int, default=1, help="optimizer steps to keep in lockstep")
            t.add_argument("--tol", type=float, default=1e-5)
            t.add_argument("--top", type=int, default=5)
        t.set_defaults(fn=fn)
    d = sub.add_parser("demo", help="compile builtin:tiny-llama with sp=2 and train it on 2 CPU ranks")
    d.add_argument("--steps", type=int, default=40)
    d.add_argument("--seq-len", type=int, default=128)
    d.add_argument("--batch", type=int, default=4)
    d.add_argument("--lr", type=float, default=3e-3)
    d.add_argument("-o", "--output")
    d.set_defaults(fn=cmd_demo)
    a = ap.parse_args(argv)
    from autosp.frontend.errors import CompileError
    from autosp.runtime.artifact import ArtifactError
    try:
        return a.fn(a)
    except (CompileError, ArtifactError) as e:
        print(f"autospc: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
