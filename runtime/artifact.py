"""The artifact format, shared by the compiler (writer) and the runtime (reader).

An artifact is a directory:
  manifest.json   format version, layout, shapes, mesh, sha256 of every other file
  program.json    the rank-agnostic host program (see `Program` in executor.py)
  program.mlir    the final MLIR, for reading
  params.json     parameter and buffer names, shapes, dtypes, tied names
  buffers/*.bin   raw little-endian buffer values (e.g. RoPE inv_freq)
No pickle anywhere: JSON and raw bytes only.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

import torch

FORMAT_VERSION = 1
LAYOUT = "autosp-dir-v1"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
          "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}

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
SP_OPS = frozenset({"sp.attention", "sp.attention_grad", "sp.all_to_all", "sp.all_reduce", "sp.all_gather",
                    "sp.reduce_scatter", "sp.shard_slice", "sp.halo", "prim.unpack"})


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
    """Write `files` (relative path -> bytes) and a manifest with their digests."""
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

    def read(self, rel: str) -> bytes:
        with open(os.path.join(self.path, rel), "rb") as f:
            return f.read()

    def buffer(self, name: str) -> torch.Tensor:
        spec = self.params["buffers"][name]
        data = bytearray(self.read(spec["file"]))
        flat = torch.frombuffer(data, dtype=DTYPES[spec["dtype"]]) if data else torch.empty(0, dtype=DTYPES[spec["dtype"]])
        return flat.reshape(spec["shape"]).clone()


def read(path: str) -> Artifact:
    """Load and verify an artifact: format version first, then every file's digest."""
    mpath = os.path.join(path, "manifest.json")
    if not os.path.isfile(mpath):
        raise ArtifactError(f"{path}: not an autosp artifact (no manifest.json)")
    try:
        with open(mpath) as f:
            manifest = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise IntegrityError(f"{mpath}: manifest is corrupted ({e})") from None
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ArtifactError(f"{path}: artifact format version {version} is newer than this runtime supports "
                            f"({FORMAT_VERSION}); upgrade autosp")
    if manifest.get("layout") != LAYOUT:
        raise ArtifactError(f"{path}: unknown artifact layout {manifest.get('layout')!r}")
    for rel, entry in manifest["files"].items():
        full = os.path.join(path, rel)
        if not os.path.isfile(full):
            raise IntegrityError(f"{full}: file listed in the manifest is missing")
        with open(full, "rb") as f:
            data = f.read()
        if len(data) != entry["bytes"]:
            raise IntegrityError(f"{full}: truncated or resized ({len(data)} bytes, manifest says {entry['bytes']})")
        if sha256(data) != entry["sha256"]:
            raise IntegrityError(f"{full}: sha256 mismatch, the file is corrupted")
    art = Artifact(path, manifest, {}, {})
    art.program = json.loads(art.read("program.json"))
    art.params = json.loads(art.read("params.json"))
    return art
