"""The schema of an artifact's files, checked by the loader before anything is built from them.

Structure (types, ranges, known keys) is declared with a few combinators; what a structural schema
cannot say is checked by hand below: registers written before they are read and never after they are
freed, every buffer's file listed in the manifest, declared shapes against the element limit, and
forward, backward and params.json agreeing on names, shapes and dtypes. Every failure is one
ArtifactError line: `file: field: what is wrong, with the numbers`.

program.json and params.json, which the runtime executes and builds from, admit no unknown key.
manifest.json's descriptive fields and plan.json (a report the runtime never interprets) are typed
where known and may carry more fields.
"""
from __future__ import annotations

import json
import math
import os
import posixpath
import re
from typing import Any, Callable, Union

from .artifact import ALLOWED_ATEN, DTYPES, FORMAT_VERSION, INPUTS, KERNEL, LAYOUT, PACKED_INPUTS, POINTER_TYPES, SP_OPS, \
    STRIDED_KERNELS, ArtifactError, launch_args

MAX_INT = 2 ** 63 - 1
MAX_DIM = 2 ** 40            # one tensor dimension
MAX_REGISTERS = 2 ** 31
MAX_RANKS = 2 ** 20          # sp, dp
MAX_NESTING = 3              # operand lists in lists ({"l": [{"l": ...}]})
# No tensor of a program may have more elements than ELEMENT_FACTOR x max(the declared parameters and
# buffers together, tokens per step x largest declared dimension), see element_limit.
ELEMENT_FACTOR = 4
REQUIRED_FILES = ("program.json", "params.json", "plan.json")   # program.mlir is for people: checked if listed
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
MEMORY_FORMATS = ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d")
GROUPS = ("sp", "dp", "world", "ulysses", "ring")
_NAME = re.compile(r"[^.\s/\\\x00-\x1f\x7f]+(?:\.[^.\s/\\\x00-\x1f\x7f]+)*")   # a module path (ModuleDict keys too)
_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")


Where = Union[str, tuple]   # a file label, or (Where, key): formatted only when a check fails
Check = Callable[[Any, Where], None]


def fail(where: Where, msg: str):
    text = _text(where)
    raise ArtifactError(f"{text} {msg}" if text.endswith(":") else f"{text}: {msg}")


def at(where: Where, key: str | int) -> Where:
    return where, key


def _text(where: Where) -> str:
    keys = []
    while isinstance(where, tuple):
        where, key = where
        keys.append(key)
    for key in reversed(keys):
        where = f"{where}[{key}]" if isinstance(key, int) else f"{where} {key}" if where.endswith(":") \
            else f"{where}.{key}"
    return where


def show(v: Any) -> str:
    text = json.dumps(v)
    return text if len(text) <= 48 else text[:45] + "..."


def kind(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "object",
            type(None): "null"}.get(type(v), type(v).__name__)


# ------------------------------------------------------------------ combinators
def Int(lo: int = 0, hi: int = MAX_INT) -> Check:
    def check(v, where):
        if type(v) is not int:
            fail(where, f"expected an integer, got {show(v)} ({kind(v)})")
        if not lo <= v <= hi:
            fail(where, f"{v} is outside [{lo}, {hi}]")
    return check


def Num(lo: float = -math.inf) -> Check:
    def check(v, where):
        if type(v) not in (int, float) or not math.isfinite(v):
            fail(where, f"expected a finite number, got {show(v)} ({kind(v)})")
        if v < lo:
            fail(where, f"{v} is below {lo}")
    return check


def Str(choices=None, max_len: int = 4096, pattern: re.Pattern | None = None) -> Check:
    def check(v, where):
        if type(v) is not str:
            fail(where, f"expected a string, got {show(v)} ({kind(v)})")
        if len(v) > max_len:
            fail(where, f"string of {len(v)} characters, at most {max_len} allowed")
        if choices is not None and v not in choices:
            fail(where, f"{show(v)} is not one of {', '.join(sorted(choices))}")
        if pattern is not None and not pattern.fullmatch(v):
            fail(where, f"{show(v)} is not a valid value here")
    return check


def Bool(v, where):
    if type(v) is not bool:
        fail(where, f"expected true or false, got {show(v)} ({kind(v)})")


def Null(v, where):
    if v is not None:
        fail(where, f"expected null, got {show(v)} ({kind(v)})")


def Optional(check: Check) -> Check:
    def optional(v, where):
        if v is not None:
            check(v, where)
    return optional


def List(item: Check, max_len: int = MAX_REGISTERS) -> Check:
    def check(v, where):
        if type(v) is not list:
            fail(where, f"expected a list, got {show(v)} ({kind(v)})")
        if len(v) > max_len:
            fail(where, f"list of {len(v)} items, at most {max_len} allowed")
        for i, x in enumerate(v):
            item(x, at(where, i))
    return check


def Map(value: Check, key: Check = Str(max_len=1024)) -> Check:
    def check(v, where):
        if type(v) is not dict:
            fail(where, f"expected an object, got {show(v)} ({kind(v)})")
        for k, x in v.items():
            key(k, at(where, k))
            value(x, at(where, k))
    return check


def Obj(required: dict[str, Check], optional: dict[str, Check] | None = None, extra: bool = False) -> Check:
    optional = optional or {}

    def check(v, where):
        if type(v) is not dict:
            fail(where, f"expected an object, got {show(v)} ({kind(v)})")
        for k in required:
            if k not in v:
                fail(where, f"missing field {k!r}")
        for k, x in v.items():
            c = required.get(k) or optional.get(k)
            if c is not None:
                c(x, at(where, k))
            elif not extra:
                fail(where, f"unknown field {k!r} (known: {', '.join(sorted({**required, **optional}))})")
    return check


def Json(v, where):
    """Any JSON value (the parser already refused NaN, infinities and duplicate keys)."""


# ------------------------------------------------------------------ paths
def relative_path(rel: Any, where: Where) -> None:
    """A file of the artifact: relative, normalized, '/'-separated, no '..', '.', empty or hidden
    component, no backslash or control character."""
    Str(max_len=1024)(rel, where)
    if rel.startswith("/") or posixpath.normpath(rel) != rel or "\\" in rel:
        fail(where, f"{show(rel)} is not a normalized relative path inside the artifact")
    for part in rel.split("/"):
        if not _COMPONENT.fullmatch(part) or len(part) > 255:
            fail(where, f"{show(rel)} is not a normalized relative path inside the artifact "
                        f"(component {show(part)})")


# ------------------------------------------------------------------ the files' structure
SHAPE = List(Int(0, MAX_DIM), max_len=16)
DTYPE = Str(choices=DTYPES)
REG = Int(0, MAX_REGISTERS)
NAME = Str(max_len=1024, pattern=_NAME)
MESH = Obj({"sp": Int(1, MAX_RANKS), "dp": Int(1, MAX_RANKS)},
           {"order": Str(choices=("contiguous", "zigzag")), "ulysses": Int(2, MAX_RANKS)})


_I64, _NUMBER, _SHORT = Int(-2 ** 63, MAX_INT), Num(), Str(max_len=64)


def CONST(v, where):
    """A constant operand: null, a boolean, a 64-bit integer, a finite number or a short string."""
    t = type(v)
    if t is int:
        _I64(v, where)
    elif t is float:
        _NUMBER(v, where)
    elif t is str:
        _SHORT(v, where)
    elif v is not None and t is not bool:
        fail(where, f"a constant is null, a boolean, a number or a string, got {show(v)} ({kind(v)})")


def operand(v: Any, where: Where, depth: int = 0) -> None:
    if type(v) is not dict or len(v) != 1:
        fail(where, f"an operand is one object of r, c, l, dtype, memory_format, layout or device; got {show(v)}")
    (k, x), = v.items()
    if k == "r":
        REG(x, at(where, k))
    elif k == "c":
        CONST(x, at(where, k))
    elif k == "l":
        if depth >= MAX_NESTING:
            fail(where, f"operand lists nested deeper than {MAX_NESTING}")
        List(lambda e, w: operand(e, w, depth + 1), max_len=64)(x, at(where, k))
    elif k == "dtype":
        DTYPE(x, at(where, k))
    elif k == "memory_format":
        Str(choices=MEMORY_FORMATS)(x, at(where, k))
    elif k == "layout":
        Str(choices=("strided",))(x, at(where, k))
    elif k == "device":
        Null(x, at(where, k))
    else:
        fail(where, f"unknown operand kind {k!r}")


INSTRUCTION = Obj({"op": Str(max_len=128), "loc": Str(), "args": List(operand, max_len=64),
                   "out": List(REG, max_len=64), "shapes": List(Optional(SHAPE), max_len=64),
                   "dtypes": List(Optional(DTYPE), max_len=64), "free": List(REG, max_len=64 * 16)},
                  {"kwargs": Map(operand, key=Str(max_len=64, pattern=_NAME)),
                   "attrs": Map(Json, key=Str(max_len=64))})
ARG = Obj({"role": Str(choices=("param", "buffer", "input", "saved")), "name": Str(max_len=1024),
           "shape": SHAPE, "dtype": DTYPE})
SPEC = Obj({"shape": SHAPE, "dtype": DTYPE})
KERNEL_PROGRAM = Obj({"args": List(SPEC, max_len=64), "results": List(SPEC, max_len=64),
                      "num_registers": Int(0, MAX_REGISTERS), "instructions": List(INSTRUCTION), "outputs": List(REG)})
PROGRAM = Obj({"args": List(ARG), "results": List(Str(max_len=1024)), "num_registers": Int(0, MAX_REGISTERS),
               "instructions": List(INSTRUCTION), "outputs": List(REG)},
              {"kernels": Map(KERNEL_PROGRAM, key=Str(max_len=128, pattern=_COMPONENT))})
PROGRAM_FILE = Obj({"format_version": Int(1, FORMAT_VERSION), "mesh": MESH,
                    "programs": Obj({"forward": PROGRAM, "backward": PROGRAM})})
PARAMS_FILE = Obj({"parameters": Map(Obj({"shape": SHAPE, "dtype": DTYPE, "requires_grad": Bool},
                                         {"aliases": List(NAME, max_len=1024)}), key=NAME),
                   "buffers": Map(Obj({"shape": SHAPE, "dtype": DTYPE, "file": relative_path}), key=NAME)})
FILE_ENTRY = Obj({"sha256": Str(pattern=_SHA256, max_len=64), "bytes": Int(0, MAX_INT)})
MANIFEST = Obj({"format_version": Int(1, FORMAT_VERSION), "layout": Str(choices=(LAYOUT,)),
                "files": Map(FILE_ENTRY, key=relative_path)},
               {"compiler": Str(), "model": Str(), "mesh": MESH, "remat": Str(), "batch": Int(1),
                "seq_len": Int(1), "parameters": Int(0), "targets": List(Str()), "pipeline": Str(max_len=100_000),
                "stages": List(Str())}, extra=True)
PLAN_FILE = Obj({}, {"remat": Str(), "memory": Map(Num()), "timeline": Map(List(Num())),
                     "auto": Obj({}, {"budget_bytes": Int()}, extra=True),
                     "saved": List(Obj({"shape": SHAPE, "dtype": DTYPE})), "recomputed": Map(Num()),
                     "tiled": List(Obj({"kind": Str(), "module": Str(), "chunks": Int(), "tokens": Int(),
                                        "width": Int()}, extra=True)),
                     "forward_instructions": Int(), "backward_instructions": Int(),
                     "communication": Map(Obj({"count": Int(), "bytes": Num(0)}))}, extra=True)

_ATTENTION = {"causal": Bool, "scale": Num(0), "kv_groups": Int(1, 1 << 16)}
_WINDOW = {"window": Int(0, MAX_DIM)}   # format version 1 has none
# per result, the operand whose storage it is written into or -1 (format version 5; checked in program())
_IN_PLACE = {"in_place": List(Int(-1, 63), max_len=64)}

# the sp ops: (operand counts or None for any number, results or None for any number), attributes;
# attention's last operand, the document positions, is optional (format version 3)
SP_SIGNATURES: dict[str, tuple[tuple[int, ...] | None, int | None, Check | None]] = {
    KERNEL: (None, None, Obj({"name": Str(max_len=128, pattern=_COMPONENT)}, _IN_PLACE)),   # the kernel's own signature
    "sp.attention": ((3, 4), 2, Obj(_ATTENTION, _WINDOW)),
    "sp.attention_grad": ((6, 7), 3, Obj(_ATTENTION, _WINDOW)),
    "sp.ring_attention": ((3, 4), 2, Obj({**_ATTENTION, "group": Str(choices=GROUPS)}, _WINDOW)),
    "sp.ring_attention_grad": ((6, 7), 3, Obj({**_ATTENTION, "group": Str(choices=GROUPS)}, _WINDOW)),
    "sp.all_to_all": ((1,), 1, Obj({"scatter_dim": Int(-16, 15), "gather_dim": Int(-16, 15),
                                 "group": Str(choices=GROUPS)})),
    "sp.all_reduce": ((1,), 1, Obj({"op": Str(choices=("sum", "max", "avg")), "group": Str(choices=GROUPS)},
                                   _IN_PLACE)),
    "sp.all_gather": ((1,), 1, Obj({"dim": Int(-16, 15), "group": Str(choices=GROUPS)})),
    "sp.reduce_scatter": ((1,), 1, Obj({"dim": Int(-16, 15), "group": Str(choices=GROUPS)})),
    "sp.shard_slice": ((1,), 1, Obj({"dim": Int(-16, 15), "group": Str(choices=GROUPS)})),
    "sp.halo": ((1,), 1, Obj({"dim": Int(-16, 15), "width": Int(0, MAX_DIM), "fill": Num(),
                           "group": Str(choices=GROUPS)})),
    "prim.unpack": ((1,), None, None),
}
assert set(SP_SIGNATURES) == SP_OPS


# ------------------------------------------------------------------ checks by hand
def format_version(version: Any, where: Where) -> None:
    if type(version) is not int:
        fail(where, f"format_version must be an integer, got {show(version)} ({kind(version)})")
    if version > FORMAT_VERSION:
        fail(where, f"artifact format version {version} is newer than this runtime supports "
                    f"({FORMAT_VERSION}); upgrade autosp")
    if version < 1:
        fail(where, f"artifact format version {version} is not a version (this runtime reads 1 to {FORMAT_VERSION})")


def manifest(m: Any, where: Where) -> None:
    if type(m) is not dict:
        fail(where, f"expected an object, got {show(m)} ({kind(m)})")
    format_version(m.get("format_version"), where)
    if m.get("layout") != LAYOUT:
        fail(where, f"unknown artifact layout {m.get('layout')!r} (this runtime reads {LAYOUT!r})")
    MANIFEST(m, where)
    for rel in REQUIRED_FILES:
        if rel not in m["files"]:
            fail(at(where, "files"), f"{rel} is not listed; an artifact lists every file it uses")


def element_limit(args: list[dict]) -> int:
    """The most elements a tensor of the program may have: ELEMENT_FACTOR x the larger of the declared
    parameters and buffers together (a bucket of their gradients, packed for one all-reduce) and
    tokens per step x the largest declared dimension (an activation is [tokens, width], width being a
    hidden, intermediate or vocabulary size, or the sequence for a [batch, seq, seq] mask; attention
    is flash, never [seq, seq] per head)."""
    declared = [a for a in args if a["role"] in ("param", "buffer", "input")]
    weights = sum(math.prod(a["shape"]) for a in declared if a["role"] != "input")
    tokens = max((math.prod(a["shape"]) for a in declared if a["role"] == "input"), default=1)
    width = max((d for a in declared for d in a["shape"]), default=1)
    return ELEMENT_FACTOR * max(weights, tokens * width, 1)


def _registers(operands) -> list[int]:
    """The registers an instruction's operands read."""
    out: list[int] = []
    for e in operands:
        if "r" in e:
            out.append(e["r"])
        elif "l" in e:
            out.extend(_registers(e["l"]))
    return out


def _instruction(inst: dict, where: Where) -> None:
    op = inst["op"]
    if op not in ALLOWED_ATEN and op not in SP_OPS:
        fail(at(where, "op"), f"program calls {op!r}, which is not in the runtime's op allowlist")
    n_out = len(inst["out"])
    if len(inst["shapes"]) != n_out or len(inst["dtypes"]) != n_out:
        fail(where, f"{n_out} results but {len(inst['shapes'])} shapes and {len(inst['dtypes'])} dtypes")
    if op in SP_OPS:
        n_args, n_res, attrs = SP_SIGNATURES[op]
        if "kwargs" in inst:
            fail(at(where, "kwargs"), f"{op} takes no keyword operands")
        if (n_args is not None and len(inst["args"]) not in n_args) or (n_res is not None and n_out != n_res):
            fail(where, f"{op} takes {' or '.join(map(str, n_args or ['any number of']))} operands and gives "
                        f"{n_res if n_res is not None else 'any number of'} results, the instruction has "
                        f"{len(inst['args'])} and {n_out}")
        if attrs is not None:
            attrs(inst.get("attrs"), at(where, "attrs"))
        elif inst.get("attrs"):
            fail(at(where, "attrs"), f"{op} takes no attributes")
        if any("r" not in a for a in inst["args"]):
            fail(at(where, "args"), f"{op} takes registers only")
    else:
        if "attrs" in inst:
            fail(at(where, "attrs"), f"{op} takes keyword operands, not attributes")
        if _registers(inst.get("kwargs", {}).values()):
            fail(at(where, "kwargs"), f"{op}: keyword operands must be constants")


def program(p: dict, where: Where, limit: int) -> dict[int, tuple[list[int] | None, str | None]]:
    """Register dataflow and shapes of one program; returns each register's declared (shape, dtype)."""
    n = p["num_registers"]
    if len(p["args"]) > n:
        fail(at(where, "num_registers"), f"{n} registers cannot hold the {len(p['args'])} arguments")
    spec: dict[int, tuple[list[int] | None, str | None]] = {}
    freed: dict[int, int] = {}
    for i, a in enumerate(p["args"]):
        spec[i] = (a["shape"], a["dtype"])

    def alive(r: int, w: str, what: str) -> None:
        if r >= n:
            fail(w, f"{what} register {r}, outside the program's {n} registers")
        if r not in spec:
            fail(w, f"{what} register {r}, which nothing has written yet")
        if r in freed:
            fail(w, f"{what} register {r} after instruction {freed[r]} freed it")

    for idx, inst in enumerate(p["instructions"]):
        w = at(at(where, "instructions"), idx)
        _instruction(inst, w)
        for r in _registers([*inst["args"], *inst.get("kwargs", {}).values()]):
            alive(r, w, "reads")
        for r, shape, dtype in zip(inst["out"], inst["shapes"], inst["dtypes"]):
            if r >= n:
                fail(w, f"writes register {r}, outside the program's {n} registers")
            if r in spec:
                fail(w, f"writes register {r} a second time (registers are written once)")
            if shape is not None and math.prod(shape) > limit:
                fail(w, f"{inst['op']} declares a result of shape {shape} ({math.prod(shape):,} elements), above "
                        f"the limit of {limit:,} that the program's parameters and inputs allow")
            spec[r] = (shape, dtype)
        for r in inst["free"]:
            alive(r, w, "frees")
            freed[r] = idx
        _in_place(inst, spec, w)
    if len(p["outputs"]) != len(p["results"]):
        fail(where, f"{len(p['outputs'])} outputs for {len(p['results'])} results")
    for i, r in enumerate(p["outputs"]):
        alive(r, at(at(where, "outputs"), i), "returns")
    for a in p["args"]:
        if math.prod(a["shape"]) > limit:
            fail(at(where, "args"), f"{a.get('role', 'argument')} {a.get('name', '')} of shape {a['shape']} is above "
                                    f"the limit of {limit:,}")
    if n > len(spec):   # the runtime allocates num_registers slots
        fail(at(where, "num_registers"), f"{n} registers, but the arguments and instructions write only {len(spec)}")
    _kernel_calls(p, spec, where, limit)
    return spec


def _in_place(inst: dict, spec: dict, where: Where) -> None:
    """A result written into an operand: a distinct operand, freed by this instruction (nothing reads it
    after), of the result's declared shape and dtype."""
    into = inst.get("attrs", {}).get("in_place")
    if into is None:
        return
    w = at(at(where, "attrs"), "in_place")
    if len(into) != len(inst["out"]):
        fail(w, f"{len(into)} entries for {len(inst['out'])} results")
    donors = [k for k in into if k >= 0]
    if len(set(donors)) != len(donors):
        fail(w, f"an operand written into twice: {into}")
    for j, k in enumerate(into):
        if k < 0:
            continue
        if k >= len(inst["args"]):
            fail(at(w, j), f"operand {k} of {len(inst['args'])}")
        r = inst["args"][k]["r"]
        if r not in inst["free"]:
            fail(at(w, j), f"operand {k} (register {r}) is not freed by the instruction: it is read after")
        if spec[r] != spec[inst["out"][j]]:
            fail(at(w, j), f"result {j} {show(spec[inst['out'][j]])} written into operand {k} {show(spec[r])}")


def _kernel_calls(p: dict, spec: dict, where: Where, limit: int) -> None:
    """Every sp.kernel instruction calls a kernel of the program with the operands and results it
    declares; a kernel is ATen ops only (no collective, no kernel inside a kernel)."""
    kernels = p.get("kernels", {})
    for idx, inst in enumerate(p["instructions"]):
        if inst["op"] != KERNEL:
            continue
        w, name = at(at(where, "instructions"), idx), inst["attrs"]["name"]
        if name not in kernels:
            fail(w, f"calls kernel {name!r}, which the program does not define")
        k = kernels[name]
        got = [spec[a["r"]] for a in inst["args"]]
        want = [(a["shape"], a["dtype"]) for a in k["args"]]
        if got != want:
            fail(w, f"calls kernel {name!r} with {show(got)}, it takes {show(want)}")
        if list(zip(inst["shapes"], inst["dtypes"])) != [(r["shape"], r["dtype"]) for r in k["results"]]:
            fail(w, f"declares results {show(list(zip(inst['shapes'], inst['dtypes'])))} for kernel {name!r}, which "
                    f"gives {show([(r['shape'], r['dtype']) for r in k['results']])}")
    for name, k in kernels.items():
        kw = at(at(where, "kernels"), name)
        for idx, inst in enumerate(k["instructions"]):
            if inst["op"] in SP_OPS - {"prim.unpack"}:   # a split's pieces are unpacked
                fail(at(at(kw, "instructions"), idx), f"a kernel runs ATen ops only, not {inst['op']}")
        program(k, kw, limit)


def _specs(p: dict, spec: dict) -> list[tuple]:
    return [spec[r] for r in p["outputs"]]


def label(root: str, rel: str) -> str:
    return os.path.join(root, rel) + ":"


def programs(prog: dict, params: dict, man: dict, root: str) -> None:
    """program.json against itself, params.json and the manifest."""
    P = label(root, "program.json")
    PROGRAM_FILE(prog, P)
    if prog["format_version"] != man["format_version"]:
        fail(at(P, "format_version"), f"{prog['format_version']}, the manifest says {man['format_version']}")
    if "mesh" in man and man["mesh"] != prog["mesh"]:
        fail(at(P, "mesh"), f"{prog['mesh']}, the manifest says {man['mesh']}")
    fwd, bwd = prog["programs"]["forward"], prog["programs"]["backward"]
    roles = [a["role"] for a in fwd["args"]]
    order = sorted(roles, key=("param", "buffer", "input", "saved").index)
    if roles != order or "saved" in roles or [a["name"] for a in fwd["args"] if a["role"] == "input"] not in \
            (list(INPUTS), list(PACKED_INPUTS)):
        fail(at(P, "programs.forward.args"), "must be the parameters, then the buffers, then the inputs "
                                             f"{' and '.join(INPUTS)} (or {', '.join(PACKED_INPUTS)})")
    inputs = [a for a in fwd["args"] if a["role"] == "input"]
    if len(inputs[0]["shape"]) != 2 or any(a["shape"] != inputs[0]["shape"] for a in inputs):
        fail(at(P, "programs.forward.args"), f"the inputs {', '.join(show(a['shape']) for a in inputs)} "
                                             "must be one [batch, seq] shape")
    names = [a["name"] for a in fwd["args"]]
    if len(set(names)) != len(names):
        fail(at(P, "programs.forward.args"), "names an argument twice")
    limit = element_limit(fwd["args"])
    fspec = program(fwd, at(P, "programs.forward"), limit)
    bspec = program(bwd, at(P, "programs.backward"), limit)
    # the forward returns the loss and the saved values, the backward takes them and returns gradients
    n_saved = len(fwd["results"]) - 1
    if fwd["results"] != ["loss"] + [f"saved:{i}" for i in range(n_saved)]:
        fail(at(P, "programs.forward.results"), f"must be loss, saved:0, saved:1, ...; got {show(fwd['results'])}")
    loss_shape, loss_dtype = fspec[fwd["outputs"][0]]
    if loss_shape != [] or loss_dtype not in FLOAT_DTYPES:
        fail(at(P, "programs.forward.outputs[0]"), f"the loss must be a floating-point scalar, the program "
                                                          f"declares shape {loss_shape} and dtype {loss_dtype}")
    saved = [a for a in bwd["args"][len(fwd["args"]):]]
    if bwd["args"][:len(fwd["args"])] != fwd["args"] or len(saved) != n_saved or \
            any(a["role"] != "saved" for a in saved):
        fail(at(P, "programs.backward.args"), f"must be the forward's {len(fwd['args'])} arguments then its "
                                                     f"{n_saved} saved values")
    for i, (a, (shape, dtype)) in enumerate(zip(saved, _specs(fwd, fspec)[1:])):
        if (a["shape"], a["dtype"]) != (shape, dtype):
            fail(at(P, f"programs.backward.args[{len(fwd['args']) + i}]"),
                 f"saved value {i} is {a['shape']} {a['dtype']}, the forward returns {shape} {dtype}")
    param_args = {a["name"]: a for a in fwd["args"] if a["role"] == "param"}
    grads = []
    for i, (res, (shape, dtype)) in enumerate(zip(bwd["results"], _specs(bwd, bspec))):
        w = at(P, f"programs.backward.results[{i}]")
        name = res.removeprefix("grad:")
        if not res.startswith("grad:") or name not in param_args:
            fail(w, f"{show(res)} is not grad:<a parameter of the forward>")
        a = param_args[name]
        if (shape, dtype) != (a["shape"], a["dtype"]):
            fail(w, f"the gradient of {name} is declared {shape} {dtype}, the parameter is {a['shape']} {a['dtype']}")
        grads.append(name)
    if len(set(grads)) != len(grads):
        fail(at(P, "programs.backward.results"), "names a gradient twice")
    _params(params, fwd, man, root)


def _params(params: dict, fwd: dict, man: dict, root: str) -> None:
    Q, M = label(root, "params.json"), label(root, "manifest.json")
    PARAMS_FILE(params, Q)
    for role, key in (("param", "parameters"), ("buffer", "buffers")):
        args = {a["name"]: a for a in fwd["args"] if a["role"] == role}
        if set(args) != set(params[key]):
            diff = sorted(set(args) ^ set(params[key]))
            fail(at(Q, key), f"names {len(params[key])}, the program's {role} arguments {len(args)} "
                                        f"(differing: {', '.join(diff[:3])})")
        for name, a in args.items():
            s = params[key][name]
            if (s["shape"], s["dtype"]) != (a["shape"], a["dtype"]):
                fail(at(at(Q, key), name), f"{s['shape']} {s['dtype']}, the program declares "
                                                   f"{a['shape']} {a['dtype']}")
    names = {*params["parameters"], *(x for s in params["parameters"].values() for x in s.get("aliases", [])),
             *params["buffers"]}   # tied weights name each other as aliases
    if set(params["buffers"]) & {*params["parameters"], *(x for s in params["parameters"].values()
                                                          for x in s.get("aliases", []))}:
        fail(Q, "a buffer has the name of a parameter")
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts)):
            if ".".join(parts[:i]) in names:
                fail(Q, f"{name!r} lies inside {'.'.join(parts[:i])!r}, which is a tensor")
    for name, s in params["buffers"].items():
        w = at(at(at(Q, "buffers"), name), "file")
        entry = man["files"].get(s["file"])
        if entry is None:
            fail(w, f"{s['file']} is not listed in the manifest")
        size = math.prod(s["shape"]) * DTYPES[s["dtype"]].itemsize
        if entry["bytes"] != size:
            fail(w, f"{s['file']} has {entry['bytes']} bytes in the manifest, a {s['dtype']} buffer of shape "
                    f"{s['shape']} needs {size}")
    if "parameters" in man:
        n = sum(math.prod(s["shape"]) for s in params["parameters"].values())
        if man["parameters"] != n:
            fail(at(M, "parameters"), f"{man['parameters']}, params.json declares {n}")
    shape = next(a["shape"] for a in fwd["args"] if a["role"] == "input")
    for i, key in enumerate(("batch", "seq_len")):
        if key in man and man[key] != shape[i]:
            fail(at(M, key), f"{man[key]}, the program's input is {shape}")


LAUNCH_PATH = re.compile(r"kernels/([A-Za-z0-9_]+)/launch\.json")
_KERNEL_NAME = Str(max_len=128, pattern=_COMPONENT)
LAUNCH = Obj({"object": Str(max_len=160, pattern=_COMPONENT), "grid": List(Int(1, 2 ** 31 - 1), max_len=3),
              "symbol": Str(max_len=128, pattern=_COMPONENT), "num_warps": Int(1, 64), "warp_size": Int(1, 128),
              "shared": Int(0, 1 << 24), "global_scratch_size": Int(0, 1 << 30),
              "profile_scratch_size": Int(0, 1 << 30), "num_ctas": Int(1, 1),
              "arg_types": List(Str(choices=(*POINTER_TYPES.values(), "i64")), max_len=1024)})
LAUNCH_FILE = Obj({"target": Str(max_len=64), "kernels": Map(LAUNCH, key=_KERNEL_NAME),
                   "fallback": Map(Str(), key=_KERNEL_NAME)})


def launches(doc: Any, rel: str, prog: dict, man: dict, root: str) -> None:
    """kernels/<arch>/launch.json (format version 4 on): every kernel it launches is one the programs
    call, with its launch_args (a pointer per operand and result of its dtype, then the operands'
    strides), and an object the manifest lists beside it."""
    where = label(root, rel)
    LAUNCH_FILE(doc, where)
    arch = LAUNCH_PATH.fullmatch(rel).group(1)
    kernels = {n: k for p in prog["programs"].values() for n, k in p.get("kernels", {}).items()}
    if doc["kernels"] and man["format_version"] < STRIDED_KERNELS:
        fail(where, f"kernel objects of format version {man['format_version']} take contiguous copies of their inputs, "
                    f"this runtime passes strides (version {STRIDED_KERNELS}): compile the model again")
    for name, entry in doc["kernels"].items():
        w = at(at(where, "kernels"), name)
        if name not in kernels:
            fail(w, "launches a kernel that no program calls")
        k = kernels[name]
        want = [t for _, t in launch_args(k)]
        if entry["arg_types"] != want:
            fail(at(w, "arg_types"), f"{show(entry['arg_types'])}, the kernel's operands, results and operands' "
                                     f"strides are {show(want)}")
        if f"kernels/{arch}/{entry['object']}" not in man["files"]:
            fail(at(w, "object"), f"kernels/{arch}/{entry['object']} is not listed in the manifest")


def plan(p: Any, root: str) -> None:
    PLAN_FILE(p, label(root, "plan.json"))
