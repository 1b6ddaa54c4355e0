"""autosp-opt: run any pipeline (autosp passes mixed with upstream and torch-mlir passes) on any
.mlir file, like mlir-opt.

  autosp-opt in.mlir --pass-pipeline='builtin.module(sp-raise-attention,canonicalize)'
  autosp-opt in.mlir --split-input-file --mlir-print-ir-after-all --emit=host-program
"""
from __future__ import annotations

import argparse
import json
import re
import sys


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="autosp-opt", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", nargs="?", default="-", help="input .mlir file (default: stdin)")
    ap.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    ap.add_argument("--pass-pipeline", default="", help="textual pipeline, e.g. 'builtin.module(sp-raise-attention)'")
    ap.add_argument("--split-input-file", action="store_true", help="split the input at '// -----' lines")
    ap.add_argument("--mlir-print-ir-after-all", action="store_true", help="print the IR after every pass (stderr)")
    ap.add_argument("--allow-unregistered-dialect", action="store_true")
    ap.add_argument("--emit", choices=["mlir", "host-program"], default="mlir",
                    help="print MLIR, or the host program lowered from it (JSON)")
    ap.add_argument("--list-passes", action="store_true", help="list the autosp passes with their options and exit")
    return ap


def _show(value, kind) -> str:
    """An option's default as one would write it: sizes in MiB when whole."""
    from autosp.passes.base import Bytes
    if kind is Bytes and value and value % 2**20 == 0:
        return f"{value // 2**20}MiB"
    return str(value)


def list_passes(passes: dict) -> str:
    """Every pass with its summary, and each option with its type, default and meaning."""
    import typing
    lines = []
    for name, cls in passes.items():
        lines.append(f"{name:24s} {cls.summary()}")
        hints = typing.get_type_hints(cls)
        for f in cls.options():
            kind = " | ".join(getattr(t, "__name__", str(t)) for t in (typing.get_args(hints[f.name]) or (hints[f.name],))
                              if t is not type(None))
            choices = f" ({' | '.join(f.metadata['choices'])})" if f.metadata.get("choices") else ""
            default = "unset" if f.default is None else _show(f.default, hints[f.name])
            lines.append(f"    {f.name}={kind}{choices}, default {default}: {f.metadata['help']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d

    from autosp.dialects import sp
    from autosp.passes import PASSES, PassError, build_pass_manager
    from autosp.lowering.host_program import lower_to_host_program

    if a.list_passes:
        print(list_passes(PASSES))
        return 0
    text = sys.stdin.read() if a.input == "-" else open(a.input).read()
    fname = "<stdin>" if a.input == "-" else a.input
    chunks = re.split(r"^// -----[ \t]*$", text, flags=re.M) if a.split_input_file else [text]
    outputs, rc, offset = [], 0, 0

    def where(loc) -> str:
        # Module.parse knows no file name: locations read "-":L:C
        m = re.search(r'"-":(\d+):(\d+)', str(loc))
        return f"{fname}:{m.group(1)}:{m.group(2)}" if m else str(loc)

    for chunk in chunks:
        padded = "\n" * offset + chunk   # keep absolute line numbers with --split-input-file
        offset += chunk.count("\n")
        ctx = ir.Context()
        torch_d.register_dialect(ctx)
        ctx.allow_unregistered_dialects = a.allow_unregistered_dialect
        ctx.enable_multithreading(False)

        def on_diag(d) -> bool:
            sev = {ir.DiagnosticSeverity.ERROR: "error", ir.DiagnosticSeverity.WARNING: "warning",
                   ir.DiagnosticSeverity.NOTE: "note", ir.DiagnosticSeverity.REMARK: "remark"}[d.severity]
            print(f"{where(d.location)}: {sev}: {d.message}", file=sys.stderr)
            return True

        ctx.attach_diagnostic_handler(on_diag)
        with ctx, ir.Location.unknown():
            sp.load()
            try:
                module = ir.Module.parse(padded)
                if a.pass_pipeline:
                    pm = build_pass_manager(a.pass_pipeline)
                    if a.mlir_print_ir_after_all:
                        pm.enable_ir_printing(print_after_all=True)
                    pm.run(module.operation)
                if a.emit == "host-program":
                    outputs.append(json.dumps(lower_to_host_program(module), indent=1))
                else:
                    outputs.append(str(module))
            except ir.MLIRError as e:
                rc = 1
                for d in e.error_diagnostics:
                    print(f"{where(d.location)}: error: {d.message}", file=sys.stderr)
                if not e.error_diagnostics and "diagnostic" not in str(e):
                    print(f"{fname}: error: {e}", file=sys.stderr)
            except (PassError, ValueError, KeyError) as e:
                rc = 1
                loc = getattr(e, "location", None)
                print(f"{where(loc) if loc is not None else fname}: error: {e}", file=sys.stderr)
    out = "\n// -----\n".join(outputs)
    if a.output == "-":
        sys.stdout.write(out + ("\n" if out and not out.endswith("\n") else ""))
    else:
        with open(a.output, "w") as f:
            f.write(out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
