"""Training checkpoints as safetensors + JSON (no pickle), resumed bit-identically.

DIR/step-N/model.safetensors      the parameters (rank 0; every rank holds the same)
DIR/step-N/optimizer.safetensors  the optimizer's tensor state, keyed "<param index>.<name>" (rank 0; ZeRO-1's
                                  shards gathered there first)
DIR/step-N/optimizer.json         its param_groups and non-tensor state
DIR/step-N/rank-R.safetensors     rank R's random state: torch's CPU generator, the compiled module's
                                  dropout generators (CompiledModule.rng_state) and the data sampler's
DIR/step-N/meta.json              step, world size, losses so far
DIR/latest.json                   {"step": N}, written last, once every rank has written its part
"""
from __future__ import annotations

import json
import os
from typing import Any

import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed here: one line with the numbers."""


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def _rank() -> tuple[int, int]:
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def save(root: str, step: int, module: torch.nn.Module, opt: torch.optim.Optimizer,
         rank_state: dict[str, torch.Tensor], meta: dict[str, Any]) -> str:
    """Write step `step` under root (every rank calls it); returns the step's directory."""
    rank, world = _rank()
    d = os.path.join(root, f"step-{step}")
    os.makedirs(d, exist_ok=True)
    if hasattr(opt, "consolidate_state_dict"):   # ZeRO-1: every rank sends its shard of the states to rank 0
        opt.consolidate_state_dict(to=0)
    if rank == 0:
        # each parameter once (tied ones under one name); not save_model, which refuses parameters that
        # share a storage without covering it (the projections the runtime keeps side by side)
        save_file(dict(module.named_parameters()), os.path.join(d, "model.safetensors"))
        state = opt.state_dict()
        tensors, plain = {}, {}
        for i, st in state["state"].items():
            for k, v in st.items():
                if isinstance(v, torch.Tensor):
                    tensors[f"{i}.{k}"] = v.contiguous()
                else:
                    plain[f"{i}.{k}"] = v
        save_file(tensors, os.path.join(d, "optimizer.safetensors"))
        with open(os.path.join(d, "optimizer.json"), "w") as f:
            json.dump({"param_groups": state["param_groups"], "state": plain}, f)
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(dict(meta, step=step, world=world), f)
    save_file({k: v.contiguous() for k, v in rank_state.items()}, os.path.join(d, f"rank-{rank}.safetensors"))
    _barrier()
    if rank == 0:
        tmp = os.path.join(root, "latest.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"step": step}, f)
        os.replace(tmp, os.path.join(root, "latest.json"))
    _barrier()
    return d


def load(root: str, module: torch.nn.Module, opt: torch.optim.Optimizer) -> tuple[dict, dict[str, torch.Tensor]]:
    """Restore module and optimizer from root's latest step (or from root itself, one step's
    directory); returns (meta, this rank's state)."""
    latest = os.path.join(root, "latest.json")
    if os.path.isfile(os.path.join(root, "meta.json")):
        d = root
    elif os.path.isfile(latest):
        with open(latest) as f:
            d = os.path.join(root, f"step-{int(json.load(f)['step'])}")
    else:
        raise CheckpointError(f"--resume {root}: no checkpoint there (neither latest.json nor meta.json)")
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    rank, world = _rank()
    if meta["world"] != world:
        raise CheckpointError(f"--resume {d}: written by {meta['world']} ranks, this run has {world}")
    params, saved = dict(module.named_parameters()), load_file(os.path.join(d, "model.safetensors"))
    missing, unexpected = params.keys() - saved.keys(), saved.keys() - params.keys()
    if missing or unexpected:
        raise CheckpointError(f"--resume {d}: the checkpoint's parameters do not match the artifact's "
                              f"(missing {sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]})")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(saved[name])
    tensors = load_file(os.path.join(d, "optimizer.safetensors"))
    with open(os.path.join(d, "optimizer.json")) as f:
        extra = json.load(f)
    state: dict[int, dict[str, Any]] = {}
    for key, v in [*tensors.items(), *extra["state"].items()]:
        i, _, name = key.partition(".")
        state.setdefault(int(i), {})[name] = v
    opt.load_state_dict({"state": state, "param_groups": extra["param_groups"]})
    return meta, load_file(os.path.join(d, f"rank-{rank}.safetensors"))
