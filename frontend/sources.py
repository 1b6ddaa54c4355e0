"""Model sources: `builtin:tiny-llama`, `hf:PATH` (config.json or a directory holding one),
`py:module:function` (returns an nn.Module)."""
from __future__ import annotations

import contextlib
import importlib
import json
import os
from typing import Iterator

import torch
import torch.nn as nn

from .errors import CompileError
from .tiny_llama import TinyLlamaConfig, TinyLlamaForCausalLM

BUILTINS = {"tiny-llama": TinyLlamaConfig}


@contextlib.contextmanager
def empty_weights() -> Iterator[None]:
    """Build a model with parameters on the meta device (no weight memory) and real buffers.

    Buffers such as RoPE's inv_freq are computed at construction and are not in a state_dict, so
    they must stay real for the artifact to carry them."""
    register = nn.Module.register_parameter

    def to_meta(self: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(self, name, param)
        if param is not None and param.device.type != "meta":
            self._parameters[name] = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)

    nn.Module.register_parameter = to_meta
    try:
        yield
    finally:
        nn.Module.register_parameter = register


def _hf_config_path(path: str) -> str:
    cfg = os.path.join(path, "config.json") if os.path.isdir(path) else path
    if not os.path.isfile(cfg):
        raise CompileError(f"hf:{path}: no config.json found")
    return cfg


def load_model(spec: str, *, empty: bool = False, seed: int = 0) -> nn.Module:
    """The model named by `spec`; with empty=True its parameters live on meta."""
    kind, _, rest = spec.partition(":")
    torch.manual_seed(seed)
    ctx = empty_weights() if empty else contextlib.nullcontext()
    if kind == "builtin":
        if rest not in BUILTINS:
            raise CompileError(f"unknown builtin model {rest!r}; have {sorted(BUILTINS)}")
        with ctx:
            return TinyLlamaForCausalLM(BUILTINS[rest]())
    if kind == "hf":
        import transformers
        folder = os.path.dirname(os.path.abspath(_hf_config_path(rest)))
        try:
            config = transformers.AutoConfig.from_pretrained(folder)
        except (KeyError, ValueError) as e:   # an unknown model_type: KeyError inside transformers
            with open(os.path.join(folder, "config.json")) as f:
                model_type = json.load(f).get("model_type")
            raise CompileError(f"{spec}: transformers {transformers.__version__} cannot read this config "
                               f"(model_type {model_type!r}): {_first_line(e)}") from None
        config._attn_implementation = "sdpa"
        has_weights = any(f.endswith((".safetensors", ".bin")) for f in os.listdir(folder))
        # transformers' own refusals (e.g. a model without SDPA support) re-worded with the model's name
        try:
            if has_weights and not empty:
                return transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="sdpa",
                                                                         dtype=torch.float32)
            with ctx:
                return transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa",
                                                                      dtype=torch.float32)
        except (ValueError, ImportError, OSError, NotImplementedError) as e:
            raise CompileError(f"{spec}: transformers {transformers.__version__} refuses to build this "
                               f"{config.model_type} model ({', '.join(config.architectures or [])}) with "
                               f"attn_implementation='sdpa': {_first_line(e)}") from None
    if kind == "py":
        mod, _, fn = rest.partition(":")
        if not mod or not fn:
            raise CompileError(f"py source must be py:module:function, got {spec!r}")
        try:
            factory = getattr(importlib.import_module(mod), fn)
        except ImportError as e:
            raise CompileError(f"{spec}: cannot import module {mod!r} ({_first_line(e)}); is it on PYTHONPATH?") \
                from None
        except AttributeError:
            raise CompileError(f"{spec}: module {mod!r} has no attribute {fn!r}") from None
        with ctx:
            model = factory()
        if not isinstance(model, nn.Module):
            raise CompileError(f"{spec} returned {type(model).__name__}, not an nn.Module")
        return model
    raise CompileError(f"unknown model source {spec!r}: use builtin:NAME, hf:PATH or py:module:function")


def _first_line(e: BaseException) -> str:
    """The first sentence of the first line: transformers' messages go on with advice and links."""
    line = " ".join(str(e).strip().split("\n")[0].split())
    return line.split(". ")[0].rstrip(".") or type(e).__name__


def vocab_size(model: nn.Module) -> int:
    cfg = getattr(model, "config", None)
    if cfg is not None and getattr(cfg, "vocab_size", None):
        return int(cfg.vocab_size)
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if emb is None:
        emb = next(m for m in model.modules() if isinstance(m, nn.Embedding))
    return int(emb.num_embeddings)
