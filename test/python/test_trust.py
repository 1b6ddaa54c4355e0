"""The loader trusts only what it verified: every file listed and hashed, paths inside the artifact,
regular files only, strict schemas, instructions checked before the first run executes them. The
attacks of issue 14 one by one, then a seeded mutation fuzz over every file and field."""
from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import sys
from typing import Any

import pytest
import torch

import autosp
from autosp.frontend.tiny_llama import TinyLlamaConfig, TinyLlamaForCausalLM
from autosp.runtime import ArtifactError, IntegrityError
from autosp.runtime.artifact import FORMAT_VERSION, sha256
from autosp.runtime.executor import ProgramError
from autosp.verify import batch_for

BUFFER = "buffers/model.inv_freq.bin"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[str, dict]:
    """A one-layer tiny llama, batch 2, seq 16, sp=1, neither recomputing nor tiling (250 instructions):
    small enough to load and run hundreds of times; and its weights. Read-only: tests change copies."""
    torch.manual_seed(0)
    model = TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=1))
    ids = torch.zeros(2, 16, dtype=torch.long)
    path = str(tmp_path_factory.mktemp("trust") / "m.autosp")
    autosp.compile(model, (ids, ids), sp=1, remat="none", tile=None).save(path)
    return path, model.state_dict()


@pytest.fixture
def tiny(compiled) -> str:
    return compiled[0]


def _copy(src: str, tmp_path, name: str = "copy.autosp") -> str:
    dst = str(tmp_path / name)
    shutil.copytree(src, dst)
    return dst


def _json(path: str, rel: str) -> Any:
    with open(os.path.join(path, rel), "rb") as f:
        return json.load(f)


def _write(path: str, rel: str, data: bytes) -> None:
    """Replace the file (never write through it: fuzz cases hard-link their unchanged files)."""
    full = os.path.join(path, rel)
    with open(full + ".new", "wb") as f:
        f.write(data)
    os.replace(full + ".new", full)


def _sign(path: str, changed: dict[str, bytes], manifest: dict | None = None) -> None:
    """Write `changed` files and a manifest whose digests match them, as a forger would."""
    manifest = manifest if manifest is not None else _json(path, "manifest.json")
    for rel, data in changed.items():
        _write(path, rel, data)
        manifest["files"][rel] = {"sha256": sha256(data), "bytes": len(data)}
    _write(path, "manifest.json", json.dumps(manifest).encode())


def _edit(path: str, rel: str, fn) -> None:
    doc = _json(path, rel)
    doc = fn(doc) or doc
    _sign(path, {rel: json.dumps(doc).encode()})


def _run(path: str, state: dict | None = None):
    """Load, then one forward and backward: (loss, {name: grad})."""
    m = autosp.load(path)
    if state is not None:
        m.load_state_dict(state, strict=False)    # a forged params.json may name other tensors
    ids, labels = batch_for(256, m.input_shape, seed=1)
    loss = m(ids, labels)
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in m.named_parameters() if p.grad is not None}


# ------------------------------------------------------------------ the manifest lists everything
def test_program_mlir_is_optional(compiled, tmp_path):
    """program.mlir is for reading, not running: an artifact shipped without it (benchmarks/gpu_step.py
    drops it to travel light) loads and gives the same loss."""
    tiny, state = compiled
    path = _copy(tiny, tmp_path)
    man = _json(path, "manifest.json")
    del man["files"]["program.mlir"]
    os.remove(os.path.join(path, "program.mlir"))
    _write(path, "manifest.json", json.dumps(man).encode())
    assert torch.equal(_run(path, state)[0], _run(tiny, state)[0])


@pytest.mark.parametrize("rel", ["program.json", "params.json", "plan.json", BUFFER])
def test_manifest_entry_removed(tiny, tmp_path, rel):
    path = _copy(tiny, tmp_path)
    man = _json(path, "manifest.json")
    del man["files"][rel]
    _write(path, "manifest.json", json.dumps(man).encode())
    with pytest.raises(ArtifactError, match=rf"{rel}.* not listed"):
        autosp.load(path)


def test_manifest_lists_nothing(tiny, tmp_path):
    path = _copy(tiny, tmp_path)
    man = _json(path, "manifest.json")
    man["files"] = {}
    _write(path, "manifest.json", json.dumps(man).encode())
    with pytest.raises(ArtifactError, match=r"manifest.json: files: program.json is not listed"):
        autosp.load(path)


def test_buffer_outside_manifest_refused(tiny, tmp_path):
    """A buffer file present in the directory, and hashed nowhere, is not read."""
    path = _copy(tiny, tmp_path)
    shutil.copy(os.path.join(path, BUFFER), os.path.join(path, "buffers", "other.bin"))
    _edit(path, "params.json", lambda p: p["buffers"]["model.inv_freq"].update(file="buffers/other.bin"))
    with pytest.raises(ArtifactError, match=r"params.json: buffers.model.inv_freq.file: buffers/other.bin is not "
                                            r"listed in the manifest"):
        autosp.load(path)


def test_writer_refuses_what_the_loader_would(tmp_path):
    """A buffer named by a ModuleDict key with a space, say: refused at save, not at every load."""
    from autosp.runtime.artifact import write
    with pytest.raises(ArtifactError, match=r"files: \"buffers/a b.bin\" is not a normalized relative path"):
        write(str(tmp_path / "a.autosp"), {"buffers/a b.bin": b""}, {})
    assert not (tmp_path / "a.autosp").exists()


class _Opens:
    """Paths opened while active (sys.addaudithook: hooks cannot be removed, so one per session)."""
    paths: list[str] | None = None
    installed = False

    @classmethod
    def hook(cls, event: str, args: tuple) -> None:
        if event == "open" and cls.paths is not None and isinstance(args[0], (str, bytes)):
            cls.paths.append(os.fsdecode(args[0]))

    def __enter__(self) -> list[str]:
        if not _Opens.installed:
            sys.addaudithook(_Opens.hook)
            _Opens.installed = True
        _Opens.paths = []
        return _Opens.paths

    def __exit__(self, *exc) -> None:
        _Opens.paths = None


@pytest.mark.parametrize("bad", ["../secret.bin", "buffers/../../secret.bin", "/etc/passwd", "/proc/self/environ",
                                 "./" + BUFFER, "buffers//model.inv_freq.bin", "buffers\\model.inv_freq.bin"])
def test_buffer_path_outside_artifact_refused(tiny, tmp_path, bad):
    path = _copy(tiny, tmp_path)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(open(os.path.join(path, BUFFER), "rb").read())
    man = _json(path, "manifest.json")
    man["files"][bad] = man["files"][BUFFER]        # listed and "hashed", as a forger would
    params = _json(path, "params.json")
    params["buffers"]["model.inv_freq"]["file"] = bad
    _sign(path, {"params.json": json.dumps(params).encode()}, man)
    with _Opens() as opened, pytest.raises(ArtifactError, match=r"not a normalized relative path inside the artifact"):
        autosp.load(path)
    assert not [p for p in opened if not os.path.abspath(p).startswith(path + os.sep)], opened


def _replace_buffer(path: str, make) -> str:
    full = os.path.join(path, BUFFER)
    os.remove(full)
    make(full)
    return full


def test_symlinked_file_refused(tiny, tmp_path):
    """A symlink out of the artifact to a file with the right bytes and digest is still refused."""
    path = _copy(tiny, tmp_path)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(open(os.path.join(path, BUFFER), "rb").read())
    _replace_buffer(path, lambda full: os.symlink(outside, full))
    with pytest.raises(ArtifactError, match=rf"{BUFFER}: a symbolic link, not a regular file"):
        autosp.load(path)


def test_symlinked_directory_refused(tiny, tmp_path):
    path = _copy(tiny, tmp_path)
    shutil.move(os.path.join(path, "buffers"), tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", os.path.join(path, "buffers"))
    with pytest.raises(ArtifactError, match=r"buffers is a symbolic link, not a directory inside the artifact"):
        autosp.load(path)


@pytest.fixture
def alarm():
    """Fail instead of hanging if a load blocks."""
    def expire(*_):
        raise TimeoutError("autosp.load blocked")
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_fifo_refused_without_blocking(tiny, tmp_path, alarm):
    path = _copy(tiny, tmp_path)
    _replace_buffer(path, os.mkfifo)
    with pytest.raises(ArtifactError, match=rf"{BUFFER}: a FIFO, not a regular file"):
        autosp.load(path)


def test_dev_zero_refused(tiny, tmp_path, alarm):
    path = _copy(tiny, tmp_path)
    _replace_buffer(path, lambda full: os.symlink("/dev/zero", full))
    with pytest.raises(ArtifactError, match=rf"{BUFFER}: a symbolic link"):
        autosp.load(path)
    man = _json(path, "manifest.json")
    man["files"]["/dev/zero"] = {"sha256": "0" * 64, "bytes": 1 << 40}
    _write(path, "manifest.json", json.dumps(man).encode())
    with pytest.raises(ArtifactError, match=r"manifest.json: files./dev/zero: \"/dev/zero\" is not a normalized"):
        autosp.load(path)


def test_size_checked_before_reading(tiny, tmp_path):
    path = _copy(tiny, tmp_path)
    with open(os.path.join(path, "program.mlir"), "ab") as f:
        f.write(b"\0" * (1 << 20))
    with pytest.raises(IntegrityError, match=r"program.mlir: truncated or resized \(\d+ bytes, manifest says \d+\)"):
        autosp.load(path)


# ------------------------------------------------------------------ format version and JSON
@pytest.mark.parametrize("version,msg", [
    (0, rf"format version 0 is not a version \(this runtime reads 1 to {FORMAT_VERSION}\)"),
    (-1, r"format version -1 is not a version"),
    (True, r"format_version must be an integer, got true \(boolean\)"),
    ("1", r"format_version must be an integer, got \"1\" \(string\)"),
    (1.0, r"format_version must be an integer, got 1.0 \(number\)"),
    (None, r"format_version must be an integer, got null"),
    (FORMAT_VERSION + 1, rf"format version {FORMAT_VERSION + 1} is newer than this runtime supports "
                         rf"\({FORMAT_VERSION}\); upgrade autosp")])
def test_format_version(tiny, tmp_path, version, msg):
    path = _copy(tiny, tmp_path)
    man = _json(path, "manifest.json")
    man["format_version"] = version
    _write(path, "manifest.json", json.dumps(man).encode())
    with pytest.raises(ArtifactError, match=msg):
        autosp.load(path)


@pytest.mark.parametrize("text,msg", [(b'{"a": 1, "a": 2}', "key 'a' appears twice"),
                                      (b'{"a": NaN}', "NaN is not a JSON number"),
                                      (b'{"a": 1e999}', "1e999 is out of range"),
                                      (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
                                      (b"\xff", "not valid JSON")],
                         ids=["duplicate-key", "nan", "infinity", "deep", "not-utf8"])
def test_strict_json(tiny, tmp_path, text, msg):
    path = _copy(tiny, tmp_path)
    _sign(path, {"params.json": text})
    with pytest.raises(IntegrityError, match=rf"params.json: .*{msg}"):
        autosp.load(path)


def test_unknown_field_refused(tiny, tmp_path):
    path = _copy(tiny, tmp_path)
    _edit(path, "program.json", lambda p: p["programs"]["forward"]["instructions"][3].update(exec="rm -rf"))
    with pytest.raises(ArtifactError, match=r"program.json: programs.forward.instructions\[3\]: unknown field 'exec'"):
        autosp.load(path)


def test_register_outside_program(tiny, tmp_path):
    path = _copy(tiny, tmp_path)
    n = _json(path, "program.json")["programs"]["forward"]["num_registers"]
    _edit(path, "program.json", lambda p: p["programs"]["forward"]["instructions"][3]["args"].__setitem__(0, {"r": n}))
    with pytest.raises(ArtifactError, match=rf"instructions\[3\]: reads register {n}, outside the program's {n} "
                                            "registers"):
        autosp.load(path)


# ------------------------------------------------------------------ programs
def _instructions(path: str, program: str, op: str) -> list[int]:
    return [i for i, inst in enumerate(_json(path, "program.json")["programs"][program]["instructions"])
            if inst["op"] == op]


def test_attention_grad_operand_checked_before_running(tiny, tmp_path):
    """The attention gradient handed k for its `out` operand: an error naming the instruction, not
    gradients from memory the kernel should not read."""
    path = _copy(tiny, tmp_path)
    idx = _instructions(path, "backward", "sp.attention_grad")[0]

    def swap(p):
        args = p["programs"]["backward"]["instructions"][idx]["args"]
        args[4] = args[2]                                  # out <- k
    _edit(path, "program.json", swap)
    m = autosp.load(path)
    loss = m(*batch_for(256, m.input_shape, seed=1))
    with pytest.raises(ProgramError, match=rf"instruction {idx} \(sp.attention_grad, .*tiny_llama.py:\d+\): its "
                                           r"operands do not fit: out is \[2, 2, 16, 16\] .* gives \[2, 4, 16, 16\]"):
        loss.backward()


def test_mm_operand_checked_before_running(tiny, tmp_path):
    path = _copy(tiny, tmp_path)
    idx = _instructions(path, "forward", "aten.mm.default")[0]

    def swap(p):
        args = p["programs"]["forward"]["instructions"][idx]["args"]
        args[0], args[1] = args[1], args[0]
    _edit(path, "program.json", swap)
    m = autosp.load(path)
    with pytest.raises(ProgramError, match=rf"instruction {idx} \(aten.mm.default, .*\): its operands do not fit: "
                                           "a and b must have same reduction dim"):
        m(*batch_for(256, m.input_shape, seed=1))


def _kernel_call(path: str) -> tuple[int, str]:
    """The first kernel call of the forward: (instruction index, kernel name)."""
    idx = _instructions(path, "forward", "sp.kernel")[0]
    return idx, _json(path, "program.json")["programs"]["forward"]["instructions"][idx]["attrs"]["name"]


def test_kernel_call_to_undefined_kernel_refused(tiny, tmp_path):
    path = _copy(tiny, tmp_path)
    idx, name = _kernel_call(path)
    _edit(path, "program.json", lambda p: p["programs"]["forward"]["kernels"].pop(name) and None)
    with pytest.raises(ArtifactError, match=rf"programs.forward.instructions\[{idx}\]: calls kernel '{name}', "
                                            "which the program does not define"):
        autosp.load(path)


def test_kernel_holding_a_collective_refused(tiny, tmp_path):
    """A kernel is the ATen ops it replaced: a collective smuggled into one is refused at load."""
    path = _copy(tiny, tmp_path)
    _, name = _kernel_call(path)

    def smuggle(p):
        inst = p["programs"]["forward"]["kernels"][name]["instructions"][0]
        inst.pop("kwargs")
        inst.update(op="sp.all_reduce", attrs={"op": "sum", "group": "sp"}, args=inst["args"][:1])
    _edit(path, "program.json", smuggle)
    with pytest.raises(ArtifactError, match=rf"kernels.{name}.instructions\[0\]: a kernel runs ATen ops only, not "
                                            "sp.all_reduce"):
        autosp.load(path)


def test_kernel_operand_checked_before_running(tiny, tmp_path):
    """A kernel handed an operand of another shape than it was compiled for: refused at load, naming it."""
    path = _copy(tiny, tmp_path)
    idx, name = _kernel_call(path)

    def widen(p):
        arg = p["programs"]["forward"]["kernels"][name]["args"][0]
        arg["shape"] = arg["shape"][:-1] + [arg["shape"][-1] + 1]
    _edit(path, "program.json", widen)
    with pytest.raises(ArtifactError, match=rf"instructions\[{idx}\]: calls kernel '{name}' with .* it takes"):
        autosp.load(path)


def test_in_place_into_an_operand_read_later_refused(tiny, tmp_path):
    """A result may be written into an operand only where nothing reads that operand after (the
    instruction frees it) and it has the result's shape and dtype: a forged in_place is refused at
    load, before it could overwrite a value the program still needs."""
    path = _copy(tiny, tmp_path)
    program = _json(path, "program.json")["programs"]["forward"]
    idx = next(i for i in _instructions(path, "forward", "sp.kernel")
               if any(a["r"] not in program["instructions"][i]["free"] for a in program["instructions"][i]["args"]))
    inst = program["instructions"][idx]
    k = next(j for j, a in enumerate(inst["args"]) if a["r"] not in inst["free"])
    _edit(path, "program.json", lambda p: p["programs"]["forward"]["instructions"][idx]["attrs"].__setitem__(
        "in_place", [k] + [-1] * (len(inst["out"]) - 1)))
    with pytest.raises(ArtifactError, match=rf"instructions\[{idx}\]\.attrs\.in_place\[0\]: operand {k} \(register "
                                            r"\d+\) is not freed by the instruction: it is read after"):
        autosp.load(path)


def test_empty_forward_refused(tiny, tmp_path):
    path = _copy(tiny, tmp_path)
    _edit(path, "program.json", lambda p: p["programs"]["forward"].update(instructions=[]))
    with pytest.raises(ArtifactError, match=r"programs.forward.outputs\[0\]: returns register \d+, which nothing "
                                            "has written yet"):
        autosp.load(path)


def test_loss_must_be_a_scalar(tiny, tmp_path):
    path = _copy(tiny, tmp_path)

    def loss_is_an_activation(p):
        fwd = p["programs"]["forward"]
        fwd["outputs"][0] = next(i for i in fwd["instructions"] if i["op"] == "aten.embedding.default")["out"][0]
        for inst in fwd["instructions"]:
            inst["free"] = [r for r in inst["free"] if r != fwd["outputs"][0]]
    _edit(path, "program.json", loss_is_an_activation)
    with pytest.raises(ArtifactError, match=r"the loss must be a floating-point scalar, the program declares shape "
                                            r"\[2, 16, 64\] and dtype float32"):
        autosp.load(path)


def test_list_declared_a_tensor_refused(tiny, tmp_path):
    """A forger declaring a list (split's result, inside RoPE's kernel) a scalar tensor: refused before
    the kernel runs, naming the call and the instruction inside it."""
    path = _copy(tiny, tmp_path)
    fwd = _json(path, "program.json")["programs"]["forward"]
    name, j = next((n, j) for n, k in sorted(fwd["kernels"].items()) for j, inst in enumerate(k["instructions"])
                   if inst["op"] == "aten.split.Tensor")
    idx = next(i for i, inst in enumerate(fwd["instructions"]) if inst.get("attrs", {}).get("name") == name)

    def list_is_a_scalar(p):
        inst = p["programs"]["forward"]["kernels"][name]["instructions"][j]
        inst["shapes"], inst["dtypes"] = [[]], ["float32"]
    _edit(path, "program.json", list_is_a_scalar)
    m = autosp.load(path)
    with pytest.raises(ProgramError, match=rf"instruction {idx} \(sp.kernel, .*\): instruction {j} \(aten.split.Tensor, "
                                           r".*\): would produce a value that is not a tensor, the compiler declared "
                                           r"\[\] float32"):
        m(*batch_for(256, m.input_shape, seed=1))


def _full(p: dict, declared: list[int]) -> None:
    fwd = p["programs"]["forward"]
    r = fwd["num_registers"]
    fwd["num_registers"] += 1
    fwd["instructions"].insert(0, {
        "loc": "forged", "op": "aten.full.default", "args": [{"l": [{"c": 600_000_000}]}, {"c": 1.0}],
        "kwargs": {"dtype": {"c": None}, "layout": {"c": None}, "device": {"device": None}, "pin_memory": {"c": False}},
        "out": [r], "shapes": [declared], "dtypes": ["float32"], "free": [r]})


def test_huge_tensor_refused_at_load(tiny, tmp_path):
    path = _copy(tiny, tmp_path)
    _edit(path, "program.json", lambda p: _full(p, [600_000_000]))
    with pytest.raises(ArtifactError, match=r"instructions\[0\]: aten.full.default declares a result of shape "
                                            r"\[600000000\] \(600,000,000 elements\), above the limit of [\d,]+"):
        autosp.load(path)


def test_huge_tensor_refused_before_allocating(tiny, tmp_path):
    """Declared small, asked large: refused before ATen allocates 2.4 GB."""
    path = _copy(tiny, tmp_path)
    _edit(path, "program.json", lambda p: _full(p, [2]))
    m = autosp.load(path)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ProgramError, match=r"instruction 0 \(aten.full.default, forged\): would make a tensor of "
                                           r"shape \[600000000\] \(600,000,000 elements\), above the limit"):
        m(*batch_for(256, m.input_shape, seed=1))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 << 10   # KiB


def test_unmodified_artifact_runs_as_before(compiled):
    """The checks of the first run change nothing: the same loss and gradients as a second run."""
    tiny, state = compiled
    m = autosp.load(tiny)
    m.load_state_dict(state)
    batch = batch_for(256, m.input_shape, seed=1)
    first = m(*batch)
    first.backward()
    g1 = {n: p.grad.clone() for n, p in m.named_parameters()}
    m.zero_grad()
    second = m(*batch)
    second.backward()
    assert torch.equal(first, second)
    assert all(torch.equal(g1[n], p.grad) for n, p in m.named_parameters())


# ------------------------------------------------------------------ fuzz
# Fields whose mutation can only be refused or change nothing: what the runtime reads for checking
# or describing, not for computing.
_NEUTRAL = {"manifest.json": None, "plan.json": None, "program.mlir": None,
            "program.json": ("format_version", "mesh", "loc", "free", "shapes", "dtypes", "num_registers")}
FUZZ_CASES = int(os.environ.get("AUTOSP_FUZZ_CASES", 240))
_MAPS = {"parameters", "buffers", "files", "memory", "timeline", "communication", "recomputed"}
_VALUES = [0, 1, -1, 2, 16, 2 ** 31, 2 ** 63, -2 ** 63, 600_000_000, 1e308, 0.5, -0.0, True, False, None, "", "x",
           "../secret.bin", "/etc/passwd", "/dev/zero", "/proc/self/environ", "aten.full.default", "sp.halo", [], {},
           [600_000_000], {"r": 0}, {"c": 1}, {"l": [{"c": 600_000_000}]}, "float64", "int64"]


def _fields(doc: Any, path: tuple = (), pattern: tuple = ()):
    """(pattern, path) of every node; list indices and map keys are '*' in the pattern."""
    yield pattern, path
    if isinstance(doc, dict):
        keyed_by_name = len(path) == 1 and path[0] in _MAPS
        for k, v in doc.items():
            yield from _fields(v, path + (k,), pattern + ("*" if keyed_by_name else k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _fields(v, path + (i,), pattern + ("*",))


def _mutate(doc: Any, path: tuple, same: list, rng: random.Random) -> Any:
    """One mutation of the node at `path`; `same` holds the values of the nodes of its pattern."""
    if not path:
        return rng.choice([[], {}, "x", None, 1])
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key, node = path[-1], parent[path[-1]]
    how = rng.randrange(6)
    if how == 0:
        parent[key] = rng.choice(_VALUES)
    elif how == 1 and type(node) is int:
        parent[key] = node + rng.choice([-1, 1, 1000, -node - 1])
    elif how == 2:
        del parent[key]
    elif how == 3 and isinstance(node, list) and node:
        i, j = rng.randrange(len(node)), rng.randrange(len(node))
        rng.choice([lambda: node.append(node[i]), lambda: node.__setitem__(i, node[j]), lambda: node.pop(i)])()
    elif how == 4 and isinstance(parent, dict):
        parent["x" if rng.random() < 0.5 else key + "_"] = node
    else:
        parent[key] = json.loads(json.dumps(rng.choice(same)))     # another value this field takes
    return doc


def _case(src: str, dst: str, rel: str, pattern: tuple | None, rng: random.Random,
          fields: dict) -> tuple[str, bool, bool]:
    """A copy of src at dst with one field of `pattern` (or, for a binary file, its bytes) mutated:
    (what was done, neutral, signed)."""
    os.makedirs(os.path.join(dst, "buffers"))
    for r in [*_json(src, "manifest.json")["files"], "manifest.json"]:
        os.link(os.path.join(src, r), os.path.join(dst, r))
    signed = rel == "manifest.json" or rng.random() < 0.9
    original = open(os.path.join(src, rel), "rb").read()
    if pattern is not None:
        path = rng.choice(fields[rel][pattern])
        doc = json.loads(original)
        same = rng.sample(fields[rel][pattern], min(8, len(fields[rel][pattern])))
        values = [_get(doc, p) for p in same]
        data = json.dumps(_mutate(doc, path, values, rng)).encode()
        what = f"{rel} {'.'.join(map(str, pattern))} @ {'.'.join(map(str, path))}"
        neutral = _NEUTRAL.get(rel, ()) is None or any(k in _NEUTRAL.get(rel, ()) for k in pattern)
    else:
        i = rng.randrange(len(original) + 1)
        data = rng.choice([original[:i], original + b"\0" * rng.randrange(1, 64),
                           original[:i] + bytes([rng.randrange(256)]) + original[i + 1:]])
        what, neutral = f"{rel} bytes @ {i}", rel == "program.mlir"
    if signed and rel != "manifest.json":
        _sign(dst, {rel: data})
    else:
        _write(dst, rel, data)
    return what + ("" if signed else " (unsigned)"), neutral or data == original, signed or data == original


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _one_line(e: Exception) -> bool:
    return bool(str(e)) and "\n" not in str(e)


def test_fuzz(compiled, tmp_path):
    """A few hundred seeded mutations over every file and field of a compiled artifact, each signed
    as a forger would (or, one in ten, not): each ends in a one-line ArtifactError at load, a
    one-line ProgramError at the first run, or a run; a mutation of a field the runtime only checks
    or describes runs with exactly the unmutated results. Nothing outside the artifact is opened and
    memory stays bounded."""
    tiny, state = compiled
    base_loss, base_grads = _run(tiny, state)
    (tmp_path / "secret.bin").write_bytes(b"secret")
    fields: dict[str, dict] = {rel: {} for rel in ("manifest.json", "program.json", "params.json", "plan.json")}
    for rel in fields:
        for pattern, path in _fields(_json(tiny, rel)):
            fields[rel].setdefault(pattern, []).append(path)
    rng = random.Random(14)
    # every field once, then more of the program, which the runtime executes
    cases = [(rel, p) for rel in fields for p in sorted(fields[rel])] + [(BUFFER, None), ("program.mlir", None)]
    rng.shuffle(cases)
    program_fields = sorted(fields["program.json"])
    cases += [("program.json", rng.choice(program_fields)) for _ in range(FUZZ_CASES - len(cases))]
    outcomes: dict[str, int] = {}
    bad: list[str] = []
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for n, (rel, pattern) in enumerate(cases):
        dst = str(tmp_path / f"case{n}")
        what, neutral, signed = _case(tiny, dst, rel, pattern, rng, fields)
        with _Opens() as opened:
            try:
                loss, grads = _run(dst, state)
                same = torch.equal(loss, base_loss) and grads.keys() == base_grads.keys() and \
                    all(torch.equal(g, base_grads[k]) for k, g in grads.items())
                outcome = "ran, same results" if same else "ran, other results"
                if not same and (neutral or not signed):
                    bad.append(f"{what}: ran with other results (loss {loss.item()} vs {base_loss.item()})")
            except ProgramError as e:
                outcome = "ProgramError"
                if not _one_line(e) or not signed:
                    bad.append(f"{what}: {e!r}")
            except ArtifactError as e:
                outcome = type(e).__name__
                if not _one_line(e) or not signed and not isinstance(e, IntegrityError):
                    bad.append(f"{what}: {e!r}")
            except Exception as e:  # noqa: BLE001 - anything else is a finding
                outcome = "other"
                bad.append(f"{what}: {type(e).__name__}: {e}")
        outside = [p for p in opened if not os.path.abspath(p).startswith(dst + os.sep)
                   and not p.endswith((".py", ".pyc", ".so"))]
        if outside:
            bad.append(f"{what}: opened {outside}")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        shutil.rmtree(dst)
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) >> 10
    print(f"fuzz outcomes: {outcomes}; max RSS grew {grown} MiB")
    assert not bad, "\n".join(bad[:20])
    assert grown < 256
    assert outcomes.get("ran, same results", 0) and outcomes.get("ArtifactError", 0)
