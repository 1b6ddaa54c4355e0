"""The artifact format, shared by the compiler (writer) and the runtime (reader).

An artifact is a directory:
  manifest.json   format version, layout, shapes, mesh, sha256 of every other file
  program.json    the rank-agnostic host program (see `Program` in executor.py)
  program.mlir    the final MLIR, for reading
  params.json     parameter and buffer names, shapes, dtypes, tied names
  plan.json       the remat, memory and communication plan, for reading (autospc inspect)
  buffers/*.bin   raw little-endian buffer values (e.g. RoPE inv_freq)
  kernels/<arch>/ the fused kernels compiled for one GPU architecture (sm_90, gfx942, ...): objects
                  (.cubin / .hsaco) and launch.json (kernel -> object, grid, launch metadata)
No pickle anywhere: JSON and raw bytes only. The manifest lists every file the artifact uses; the
loader opens nothing else, and validates every JSON file against runtime/schema.py.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass

import torch

# 2: sliding-window attention, kernels (sp.kernel); 3: packed documents (the step's inputs PACKED_INPUTS,
# attention's document positions); 4: kernel objects read their inputs through strides (launch_args);
# 5: sp.all_reduce and kernel calls may write results into dying operands (in_place); an older runtime
# refuses the newer format by its version
FORMAT_VERSION = 5
STRIDED_KERNELS = 4   # the first version whose kernel objects take their inputs' strides
INPUTS = ("input_ids", "labels")   # the step's token inputs, [batch, seq] each
# with packed documents also the model's position_ids and each token's position in its document, which
# attention reads (runtime/documents.py derives it from position_ids and a padding mask)
PACKED_INPUTS = (*INPUTS, "position_ids", "doc_pos")
LAYOUT = "autosp-dir-v1"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
          "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
# a kernel object's pointer argument per tensor dtype (Triton's type names; kernels/<arch>/launch.json)
POINTER_TYPES = {"float32": "*fp32", "bfloat16": "*bf16", "float16": "*fp16", "bool": "*i1", "int64": "*i64",
                 "int32": "*i32", "uint8": "*u8", "int8": "*i8"}


def launch_args(kernel: dict) -> list[tuple[str, str]]:
    """A fused kernel object's arguments, (name, Triton type): a pointer per input, then per output,
    then every input's strides in elements but the last dim's (i64, one per dim): inputs are read
    through them, so a view whose last dim is unit-stride (a transpose of the leading dims, RoPE's
    [batch, heads, seq, head_dim] of a [batch, seq, heads, head_dim] projection) is passed as it is;
    the last dim's unit stride lets loads vectorize. Outputs are allocated contiguous."""
    return ([(f"in{i}", POINTER_TYPES.get(a["dtype"])) for i, a in enumerate(kernel["args"])]
            + [(f"out{j}", POINTER_TYPES.get(r["dtype"])) for j, r in enumerate(kernel["results"])]
            + [(f"in{i}_s{d}", "i64") for i, a in enumerate(kernel["args"]) for d in range(len(a["shape"]) - 1)])

# ATen overloads a program may call. The runtime refuses any other name, the compiler reports an
# op outside this list as unsupported, at its source location.
ALLOWED_ATEN = frozenset(f"aten.{n}" for n in """
    add.Tensor add.Scalar sub.Tensor sub.Scalar rsub.Scalar mul.Tensor mul.Scalar div.Tensor div.Scalar
    pow.Tensor_Scalar pow.Tensor_Tensor neg.default rsqrt.default sqrt.default exp.default log.default
    cos.default sin.default tanh.default sigmoid.default silu.default gelu.default relu.default abs.default
    reciprocal.default erf.default clamp.default maximum.default minimum.default where.self
    masked_fill.Scalar masked_fill.Tensor eq.Scalar ne.Scalar gt.Scalar lt.Scalar ge.Scalar le.Scalar
    eq.Tensor ne.Tensor gt.Tensor lt.Tensor ge.Tensor le.Tensor logical_not.default logical_and.default
    logical_or.default bitwise_not.default square.default leaky_relu.default softplus.default
    silu_backward.default gelu_backward.default sigmoid_backward.default tanh_backward.default
    threshold_backward.default
    clone.default detach.default alias.default lift_fresh_copy.default _to_copy.default to.dtype
    fill.Scalar empty_like.default ones_like.default zeros_like.default full_like.default
    arange.default arange.start arange.start_step zeros.default ones.default full.default
    empty.memory_format scalar_tensor.default new_zeros.default new_ones.default new_empty.default
    new_full.default
    view.default _unsafe_view.default reshape.default transpose.int permute.default t.default
    unsqueeze.default squeeze.dim squeeze.default expand.default slice.Tensor select.int cat.default
    stack.default split.Tensor split_with_sizes.default constant_pad_nd.default slice_backward.default
    select_backward.default repeat_interleave.self_int unbind.int
    sum.dim_IntList sum.default mean.dim mean.default amax.default _softmax.default _log_softmax.default
    _softmax_backward_data.default _log_softmax_backward_data.default
    mm.default bmm.default addmm.default
    embedding.default embedding_dense_backward.default nll_loss_forward.default nll_loss_backward.default
    native_layer_norm.default native_layer_norm_backward.default
    native_dropout.default native_dropout_backward.default
""".split()) | {"prims.convert_element_type.default"}
KERNEL = "sp.kernel"   # a fused kernel (sp-fuse): its program's "kernels" entry holds the ATen ops it replaced
SP_OPS = frozenset({KERNEL, "sp.attention", "sp.attention_grad", "sp.ring_attention", "sp.ring_attention_grad", "sp.all_to_all", "sp.all_reduce", "sp.all_gather",
                    "sp.reduce_scatter", "sp.shard_slice", "sp.halo", "prim.unpack"})


def ring_hops(n: int, rows: int, causal: bool, window: int) -> int:
    """How far a K/V block travels in sp.ring_attention over n ranks of `rows` contiguous positions
    each: all the way round, or under a causal sliding window only to the ranks whose queries reach
    it (a query sees the `window` positions up to its own)."""
    if not (causal and window):
        return n - 1
    return min(n - 1, -(-(window - 1) // rows))


def resolve(qualified: str) -> torch._ops.OpOverload:
    """'aten.sum.dim_IntList' -> torch.ops.aten.sum.dim_IntList."""
    ns, name, overload = qualified.split(".")
    return getattr(getattr(getattr(torch.ops, ns), name), overload)


class ArtifactError(Exception):
    pass


class IntegrityError(ArtifactError):
    pass


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(path: str, files: dict[str, bytes], meta: dict) -> None:
    """Write `files` (relative path -> bytes) and a manifest with their digests; a path the loader
    would refuse is refused here."""
    from .schema import relative_path
    for rel in files:
        relative_path(rel, f"{path}: files")
    os.makedirs(path, exist_ok=True)
    for rel, data in files.items():
        full = os.path.join(path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    manifest = {"format_version": FORMAT_VERSION, "layout": LAYOUT, **meta,
                "files": {rel: {"sha256": sha256(d), "bytes": len(d)} for rel, d in sorted(files.items())}}
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


@dataclass
class Artifact:
    path: str
    manifest: dict
    program: dict
    params: dict
    files: dict[str, bytes]   # every file the manifest lists, as verified at load

    def read(self, rel: str) -> bytes:
        if rel not in self.files:
            raise ArtifactError(f"{os.path.join(self.path, rel)}: not listed in the artifact's manifest")
        return self.files[rel]

    def buffer(self, name: str) -> torch.Tensor:
        spec = self.params["buffers"][name]
        data = bytearray(self.read(spec["file"]))
        flat = torch.frombuffer(data, dtype=DTYPES[spec["dtype"]]) if data else torch.empty(0, dtype=DTYPES[spec["dtype"]])
        return flat.reshape(spec["shape"]).clone()


MAX_MANIFEST_BYTES = 64 << 20


def _read_file(root: str, rel: str, size: int | None) -> bytes:
    """The bytes of root/rel, a regular file reached without following a symlink: checked with lstat
    before opening (a FIFO or device is never opened), opened O_NOFOLLOW | O_NONBLOCK and checked
    again with fstat, its size compared with the manifest's (or, for the manifest, with a cap) before
    a byte is read, and the read bounded by that size. (The intermediate directories are checked
    with lstat before the open: the artifact is assumed not to change while it loads.)"""
    full = os.path.join(root, rel)
    parts = rel.split("/")
    for i in range(1, len(parts)):
        d = os.path.join(root, *parts[:i])
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            raise IntegrityError(f"{full}: file listed in the manifest is missing") from None
        if not stat.S_ISDIR(st.st_mode):
            raise ArtifactError(f"{full}: {d} is {_file_kind(st.st_mode)}, not a directory inside the artifact")
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        raise IntegrityError(f"{full}: file listed in the manifest is missing") from None
    if not stat.S_ISREG(st.st_mode):
        raise ArtifactError(f"{full}: {_file_kind(st.st_mode)}, not a regular file; an artifact holds only "
                            "regular files")
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ArtifactError(f"{full}: cannot be opened ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ArtifactError(f"{full}: {_file_kind(st.st_mode)}, not a regular file")
        if size is None:
            if st.st_size > MAX_MANIFEST_BYTES:
                raise ArtifactError(f"{full}: {st.st_size} bytes, a manifest has at most {MAX_MANIFEST_BYTES}")
            size = st.st_size
        elif st.st_size != size:
            raise IntegrityError(f"{full}: truncated or resized ({st.st_size} bytes, manifest says {size})")
        chunks, left = [], size + 1   # one byte more: a file growing while read is caught
        while left:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) != size:
        raise IntegrityError(f"{full}: truncated or resized ({len(data)} bytes read, {size} expected)")
    return data


def _file_kind(mode: int) -> str:
    for test, what in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return what
    return "an unknown kind of file"


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _no_duplicates(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        key = next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i]))
        raise ValueError(f"key {key!r} appears twice")
    return out


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is out of range")
    return value


def parse_json(where: str, data: bytes):
    """Strict JSON: UTF-8, no NaN or infinities, no key given twice, bounded nesting."""
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite,
                          object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise IntegrityError(f"{where}: not valid JSON ({why})") from None


def read(path: str) -> Artifact:
    """Load and verify an artifact. The manifest first (format version, layout, schema, paths), then
    program.json and params.json (read, hashed, validated against the schema and each other, which
    ties every buffer to a manifest entry), then the other listed files, hashed. Nothing the
    manifest does not list is opened."""
    from . import schema
    if not os.path.isdir(path) or not os.path.lexists(os.path.join(path, "manifest.json")):
        raise ArtifactError(f"{path}: not an autosp artifact (no manifest.json)")
    mpath = os.path.join(path, "manifest.json")
    manifest = parse_json(mpath, _read_file(path, "manifest.json", None))
    schema.manifest(manifest, f"{mpath}:")
    files: dict[str, bytes] = {}

    def load(rel: str) -> bytes:
        entry = manifest["files"][rel]
        data = _read_file(path, rel, entry["bytes"])
        if sha256(data) != entry["sha256"]:
            raise IntegrityError(f"{os.path.join(path, rel)}: sha256 mismatch, the file is corrupted")
        files[rel] = data
        return data
    program = parse_json(os.path.join(path, "program.json"), load("program.json"))
    params = parse_json(os.path.join(path, "params.json"), load("params.json"))
    schema.programs(program, params, manifest, path)
    for rel in manifest["files"]:
        if rel not in files:
            load(rel)
    schema.plan(parse_json(os.path.join(path, "plan.json"), files["plan.json"]), path)
    for rel in manifest["files"]:
        if schema.LAUNCH_PATH.fullmatch(rel):
            schema.launches(parse_json(os.path.join(path, rel), files[rel]), rel, program, manifest, path)
    return Artifact(path, manifest, program, params, files)
