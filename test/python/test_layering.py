"""The house rules that a reader cannot see from one file: imports flow one way (frontend -> passes ->
lowering -> artifact -> runtime), and the sp.* attributes that carry the contract between the
importer, the passes, the lowering and the artifact writer are the ones passes/attributes.py declares,
written and read by whom it says."""
from __future__ import annotations

import ast
import os
import re

import pytest

from autosp.passes.attributes import ATTRIBUTES

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMPILER = ("frontend", "dialects", "passes", "lowering")
# the CLI / report / driver layer: the compiler's folders call none of it
DRIVERS = {"autosp.cli", "autosp.compiler", "autosp.packaging", "autosp.inspect_artifact", "autosp.planner",
           "autosp.train", "autosp.verify", "autosp.launch", "autosp.data"}


def _sources(folder: str) -> list[str]:
    top = os.path.join(ROOT, folder)
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs if f.endswith(".py"))


def _imports(path: str) -> set[str]:
    """Absolute modules a file imports, function-local imports included."""
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def _under(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


@pytest.mark.parametrize("folder", COMPILER)
def test_compiler_imports_no_driver(folder):
    bad = [(os.path.relpath(p, ROOT), m) for p in _sources(folder) for m in _imports(p) if _under(m, DRIVERS)]
    assert not bad, f"the compiler's folders import the CLI / driver layer: {bad}"


def test_runtime_imports_no_compiler():
    compiler = {f"autosp.{f}" for f in COMPILER} | DRIVERS | {"torch_mlir", "triton"}
    bad = [(os.path.relpath(p, ROOT), m) for p in _sources("runtime") for m in _imports(p) if _under(m, compiler)]
    assert not bad, f"the runtime imports compiler code: {bad}"


def test_triton_only_in_codegen():
    """Triton is a compiler-side extra (pyproject's `compiler`): only codegen imports it, so the
    passes run without it and a runtime machine never needs it."""
    users = {os.path.relpath(p, ROOT) for f in COMPILER + ("python/autosp", "runtime") for p in _sources(f)
             if any(_under(m, {"triton"}) for m in _imports(p))}
    assert users <= {"lowering/triton_kernels.py"}, f"triton imported outside codegen: {sorted(users)}"


def test_checker_sees_a_wrong_way_import(tmp_path):
    """The scan above would catch a function-local import of the CLI layer."""
    f = tmp_path / "p.py"
    f.write_text("def g():\n    from autosp.inspect_artifact import human\n")
    assert _under("autosp.inspect_artifact", DRIVERS) and "autosp.inspect_artifact" in _imports(str(f))


# who each file speaks for in the attribute table
COMPONENT = {
    "frontend/importer.py": "importer",
    "passes/sp_merge_projections.py": "sp-merge-projections",
    "passes/sp_propagate_sequence.py": "sp-propagate-sequence",
    "passes/sp_partition_sequence.py": "sp-partition-sequence",
    "passes/sp_pad_sequence.py": "sp-pad-sequence",
    "passes/sp_tile_sequence.py": "sp-tile-sequence",
    "passes/sp_tile_sequence_mlp.py": "sp-tile-sequence",
    "passes/tiling.py": "sp-tile-sequence",
    "passes/sp_plan_remat.py": "sp-plan-remat",
    "passes/sp_plan_remat_auto.py": "sp-plan-remat",
    "passes/sp_plan_memory.py": "sp-plan-memory",
    "passes/sp_fuse.py": "sp-fuse",
    "passes/torch_ir.py": "torch-ir",
    "lowering/triton_kernels.py": "codegen",
    "lowering/host_program.py": "host-program",
    "python/autosp/packaging.py": "artifact",
}
_LITERAL = re.compile(r"""["'](sp\.[a-z_]+)["']""")
_WRITE = re.compile(r"""attributes\[["'](sp\.[a-z_]+)["']\]\s*=(?!=)""")


def _sp_ops() -> set[str]:
    from autosp.dialects import sp
    return {cls.OPERATION_NAME for cls in vars(sp).values() if isinstance(cls, type) and hasattr(cls, "OPERATION_NAME")}


def _uses() -> list[tuple[str, str, bool]]:
    """(file, attribute, written) for every sp.* attribute a source file names."""
    ops = _sp_ops()
    files = [p for f in COMPILER + ("python/autosp",) for p in _sources(f)]
    out = []
    for path in files:
        rel = os.path.relpath(path, ROOT)
        text = open(path).read()
        writes = set(_WRITE.findall(text))
        for name in set(_LITERAL.findall(text)) - ops:
            out.append((rel, name, name in writes))
    return out


def test_every_attribute_is_declared():
    undeclared = sorted({(f, a) for f, a, _ in _uses() if a not in ATTRIBUTES})
    assert not undeclared, f"sp.* attributes missing from passes/attributes.py: {undeclared}"


def test_writers_and_readers_are_declared():
    wrong = []
    for f, a, written in _uses():
        if f == "passes/attributes.py":
            continue
        who = COMPONENT.get(f, f)
        decl = ATTRIBUTES[a]
        if written and who not in decl.writers:
            wrong.append(f"{f} ({who}) writes {a}; declared writers {decl.writers}")
        if not written and who not in decl.readers + decl.writers:
            wrong.append(f"{f} ({who}) reads {a}; declared readers {decl.readers}")
    assert not wrong, "\n".join(wrong)


def test_every_attribute_is_written_by_its_origin():
    written = {(COMPONENT.get(f), a) for f, a, w in _uses() if w}
    missing = [a.name for a in ATTRIBUTES.values() if (a.writers[0], a.name) not in written]
    assert not missing, f"declared but never written by their first writer: {missing}"
