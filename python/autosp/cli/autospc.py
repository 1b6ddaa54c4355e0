"""autospc: compile a model into a sequence-parallel training artifact, inspect it, train it,
verify it against eager.

  autospc compile builtin:tiny-llama --seq-len 256 --batch 2 --sp 2 -o m.autosp
  autospc inspect m.autosp [--json] [--plot timeline.png]
  autospc plan builtin:tiny-llama --sp 2 --memory 64MiB
  autospc train m.autosp --nproc 2 --steps 40 [--zero]   (or: torchrun --nproc-per-node 2 -m autosp.cli.autospc train m.autosp)
  autospc verify m.autosp --nproc 2
  autospc demo
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

from autosp.runtime.collectives import DEFAULT_TIMEOUT_S


def _compile(spec: str, seq_len: int, batch: int, sp: int, dp: int, out: str, remat: str = "sac",
             memory_budget: str | None = None, tile: str | None = None, keep_ir: bool = False,
             precision: str = "fp32", attention: str = "auto", targets: tuple[str, ...] = (),
             packed: bool = False, reserve: str | None = None) -> None:
    import torch

    import autosp
    from autosp.frontend.sources import load_model
    model = load_model(spec, empty=True)
    ids = torch.zeros(batch, seq_len, dtype=torch.long)
    print(f"compiling {spec} for [{batch}, {seq_len}] tokens, sp={sp} x dp={dp} ...", flush=True)
    art = autosp.compile(model, example_inputs=(ids, ids), sp=sp, dp=dp, remat=remat, memory_budget=memory_budget,
                         tile=int(tile) if tile and tile.isdigit() else tile, model_name=spec, keep_ir=keep_ir,
                         precision=precision, attention=attention, targets=targets, packed=packed,
                         reserve=reserve or 0)
    art.save(out)
    t = art.timings
    print(f"wrote {out}: {art.num_instructions} instructions; " + ", ".join(f"{stage} {s:.1f} s" for stage, s in t.items()))


def _targets(text: str) -> tuple[str, ...]:
    from autosp.lowering.triton_kernels import TARGETS
    targets = tuple(t.strip() for t in text.split(",") if t.strip())
    for t in targets:
        if t not in TARGETS:
            raise argparse.ArgumentTypeError(f"unknown target {t!r} (targets: {', '.join(TARGETS)})")
    return targets


def _source(out: str, override: str | None) -> str:
    from autosp.runtime.artifact import read
    spec = override or read(out).manifest.get("model", "")
    if not spec.startswith(("builtin:", "hf:", "py:")):
        raise SystemExit(f"{out} does not name its source model; pass --model builtin:NAME | hf:PATH | py:mod:fn")
    return spec


def cmd_compile(a) -> int:
    _compile(a.model, a.seq_len, a.batch, a.sp, a.dp, a.output, a.remat, a.memory_budget, a.tile, a.keep_ir,
             a.precision, a.attention, a.targets or (), a.packed, a.reserve)
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
    from autosp.planner import longest_sequence, optimizer_state_bytes
    from autosp.units import human, less_reserve, parse_bytes
    memory, reserve = parse_bytes(a.memory), parse_bytes(a.reserve) if a.reserve else 0
    try:
        step = less_reserve(memory, reserve, ("--memory", "--reserve"))
    except ValueError as e:
        raise SystemExit(str(e)) from None
    model = load_model(a.model, empty=True)
    ranks = a.sp * a.dp
    optimizers = {"AdamW": optimizer_state_bytes(model), "ZeRO-1": optimizer_state_bytes(model, ranks)}
    fits = longest_sequence(model, a.sp, step, batch=a.batch, dp=a.dp, tile=a.tile, optimizers=optimizers)
    held = f" ({human(memory)} less a {human(reserve)} reserve)" if reserve else ""
    print(f"{a.model}: the longest sequence per policy at batch {a.batch}, sp={a.sp} x dp={a.dp}, within "
          f"{human(step)} per rank{held}, training with AdamW (2 states per parameter) on every rank, or "
          f"sharded over the {ranks} ranks by ZeroRedundancyOptimizer (ZeRO-1) (predicted, nothing run)")
    print(f"{'policy':6s} {'optimizer':9s} {'states':>10s} {'seq_len':>10s} {'peak':>12s}")
    for f in fits:
        print(f.row())
    return 0


def cmd_train(a) -> int:
    from autosp.train import TrainOptions, train
    train(a.artifact, _source(a.artifact, a.model), a.nproc, TrainOptions(
        steps=a.steps, lr=a.lr, seed=a.seed, data=a.data, tokenizer=a.tokenizer, bin_dtype=a.bin_dtype,
        checkpoint=a.checkpoint, save_every=a.save_every, resume=a.resume, log=a.log, threads=a.threads,
        timeout_s=a.timeout, zero=a.zero))
    return 0


def cmd_verify(a) -> int:
    from autosp.verify import verify
    reports = verify(a.artifact, _source(a.artifact, a.model), a.nproc, a.seed, a.steps, timeout_s=a.timeout)
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
    from autosp.train import TrainOptions, train
    losses = train(out, "builtin:tiny-llama", 2, TrainOptions(steps=a.steps, lr=a.lr))
    if not losses[-1] < losses[0]:
        print(f"demo: loss did not fall ({losses[0]:.4f} -> {losses[-1]:.4f})", file=sys.stderr)
        return 1
    return 0


class _Parser(argparse.ArgumentParser):
    """Every argument error is one line, `autospc: error: ...`, exit code 2."""

    def error(self, message: str):
        self.exit(2, f"autospc: error: {self.prog.removeprefix('autospc ')}: {message} (see {self.prog} --help)\n")


def _count(text: str) -> int:
    """A positive integer: sequence lengths, batches, degrees, steps, ranks, threads."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def _size(text: str) -> str:
    """A byte size such as 12GiB, 500MB or 1e9 (checked here, parsed by the compiler)."""
    from autosp.units import parse_bytes
    try:
        parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


TILE_HELP = "LM head + loss and MLPs in N token chunks, 'auto' or 0 (off)"


def _attention(text: str) -> str:
    """auto, ulysses, ring, hybrid or UxR (checked here, used by the compiler)."""
    from autosp.passes.attention_scheme import mode_error
    if mode_error(text):
        raise argparse.ArgumentTypeError(mode_error(text))
    return text


def _tile(text: str) -> str:
    if text != "auto" and not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number of chunks (0: off), got {text!r}")
    return text


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Every argument's default, unless its help already says what happens without it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is None or action.default is argparse.SUPPRESS or "default" in text:
            return text
        return super()._get_help_string(action)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="autospc", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def command(name: str, helptext: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=helptext, description=helptext,
                              formatter_class=_Help)

    c = command("compile", "compile MODEL (builtin:NAME | hf:PATH | py:module:function)")
    c.add_argument("model", help="builtin:NAME, hf:PATH (config.json or its directory) or py:module:function")
    c.add_argument("--seq-len", type=_count, required=True, help="tokens per sequence (the global S)")
    c.add_argument("--batch", type=_count, default=1, help="sequences per step (per dp replica)")
    c.add_argument("--sp", type=_count, default=1, help="sequence-parallel degree")
    c.add_argument("--dp", type=_count, default=1, help="data-parallel degree (world = sp x dp)")
    c.add_argument("--attention", type=_attention, default="auto",
                   help="ulysses: all-to-alls split the heads (sp must divide them); ring: K/V blocks travel "
                        "around the ranks (any sp); hybrid: ulysses x ring; UxR: those degrees (e.g. 2x4); "
                        "auto: the one that sends the fewest bytes")
    c.add_argument("--remat", choices=["none", "full", "sac", "auto"], default="sac",
                   help="what the forward saves for the backward (sac: sequence-aware; auto: the per-value "
                        "plan with the least recompute that fits --memory-budget)")
    c.add_argument("--memory-budget", type=_size,
                   help="per-rank bytes or e.g. 12GiB; compiling fails above it (default: no budget)")
    c.add_argument("--reserve", type=_size,
                   help="the part of --memory-budget the device holds beside the step, e.g. 32MiB for cuBLAS's "
                        "workspace on Hopper: the step is planned to fit the rest (default: 0)")
    c.add_argument("--tile", type=_tile, default="auto", help=TILE_HELP)
    c.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="bf16 / fp16: the step as under torch.autocast, fp32 parameters and gradients")
    c.add_argument("--targets", type=_targets,
                   help="GPUs to compile the fused kernels for, comma-separated: cuda:90, cuda:80, hip:gfx942, "
                        "hip:gfx90a (default: none; the runtime runs the ATen ops they replace)")
    c.add_argument("--packed", action="store_true",
                   help="the step also takes an attention_mask (right padding) and packed documents "
                        "(position_ids restarting per document, or cu_seqlens); Hugging Face models")
    c.add_argument("--keep-ir", action="store_true",
                   help="keep every stage's IR in the artifact: ir/<n>-<stage>.* (capture, import, sp, host, codegen)")
    c.add_argument("-o", "--output", required=True, help="artifact directory to write")
    c.set_defaults(fn=cmd_compile)
    pl = command("plan", "the longest sequence that fits a memory size, per remat policy (none, sac, full, auto)")
    pl.add_argument("model", help="builtin:NAME, hf:PATH or py:module:function")
    pl.add_argument("--sp", type=_count, default=1, help="sequence-parallel degree")
    pl.add_argument("--dp", type=_count, default=1, help="data-parallel degree")
    pl.add_argument("--batch", type=_count, default=1, help="sequences per step (per dp replica)")
    pl.add_argument("--memory", type=_size, required=True, help="per-rank memory, e.g. 80GiB")
    pl.add_argument("--reserve", type=_size, help="the part of --memory the device holds beside the step, as "
                    "compile --reserve (default: 0)")
    pl.add_argument("--tile", type=_tile, default="auto", help=TILE_HELP)
    pl.set_defaults(fn=cmd_plan)
    i = command("inspect", "stages, collectives and bytes moved per step, parameters, predicted peak")
    i.add_argument("artifact", help="artifact directory")
    i.add_argument("--json", action="store_true", help="machine-readable (predicted_peak_bytes, breakdown, ...)")
    i.add_argument("--plot", metavar="FILE.png", help="draw the memory timeline of one step (default: no plot)")
    i.set_defaults(fn=cmd_inspect)
    for name, fn, helptext in (("train", cmd_train, "train on CPU ranks (spawned, or under torchrun)"),
                               ("verify", cmd_verify, "compare loss and gradients with eager")):
        t = command(name, helptext)
        t.add_argument("artifact", help="artifact directory")
        t.add_argument("--nproc", type=_count, default=1, help="CPU ranks to spawn (ignored under torchrun)")
        t.add_argument("--model", help="source model for the initial weights (default: the compiled one)")
        t.add_argument("--seed", type=int, default=0, help="seed of the initial weights and the data")
        t.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                       help="seconds a collective waits for a peer before the run fails")
        if name == "train":
            t.add_argument("--steps", type=_count, default=20,
                           help="optimizer steps in all (a resumed run continues to it)")
            t.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate")
            t.add_argument("--zero", action="store_true",
                           help="shard AdamW's states over all sp x dp ranks (ZeroRedundancyOptimizer, ZeRO-1)")
            t.add_argument("--threads", type=_count, default=1, help="intra-op threads per rank")
            t.add_argument("--data", help="a text file, a tokenized .bin or a datasets directory (default: "
                                          "the corpus shipped with autosp)")
            t.add_argument("--bin-dtype", choices=["uint16", "uint32"], default="uint16",
                           help="token id type of a .bin (raw little-endian)")
            t.add_argument("--tokenizer", default="byte", help="'byte' or a Hugging Face tokenizer name (in the "
                                                               "local cache) or path, for text data")
            t.add_argument("--checkpoint", metavar="DIR", help="write checkpoints (safetensors + JSON) to DIR "
                                                                "(default: none written)")
            t.add_argument("--save-every", type=int, default=0, help="steps between checkpoints (0: only at the end)")
            t.add_argument("--resume", metavar="DIR", help="resume model, optimizer, RNG and data position from "
                                                           "DIR's latest step or DIR/step-N (default: start afresh)")
            t.add_argument("--log", metavar="FILE", help="one row per step (loss, tokens/s) to FILE.csv or FILE.jsonl "
                                                            "(default: printed only)")
        else:
            t.add_argument("--steps", type=_count, default=1, help="optimizer steps to keep in lockstep")
            t.add_argument("--tol", type=float, default=1e-5, help="largest relative error that passes")
            t.add_argument("--top", type=int, default=5, help="gradient errors to print")
        t.set_defaults(fn=fn)
    d = command("demo", "compile builtin:tiny-llama with sp=2 and train it on 2 CPU ranks")
    d.add_argument("--steps", type=_count, default=40, help="training steps")
    d.add_argument("--seq-len", type=_count, default=128, help="tokens per sequence")
    d.add_argument("--batch", type=_count, default=4, help="sequences per step")
    d.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate")
    d.add_argument("-o", "--output", help="artifact directory (default: a temporary one)")
    d.set_defaults(fn=cmd_demo)
    return ap


def _message(e: Exception) -> str:
    """One line; a CompileError's own `error:` prefix folded into autospc's."""
    text = " ".join(str(e).split("\n")[0].split())
    where = getattr(e, "where", None)
    if where and text.startswith(f"{where}: error: "):
        return f"{where}: " + text.removeprefix(f"{where}: error: ")
    return text.removeprefix("error: ")


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    from autosp.launch import user_errors
    try:
        return a.fn(a)
    except user_errors() as e:
        print(f"autospc: error: {_message(e)}", file=sys.stderr)
        if getattr(e, "reproduce", None):
            print(f"autospc: note: reproduce with: {e.reproduce}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
