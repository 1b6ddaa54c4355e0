"""One GPU, one run: autosp's training step against Hugging Face baselines, side by side.

Two halves, because the GPU machine has no torch-mlir:

    python benchmarks/gpu_step.py --compile DIR [--tiny]      # CPU host: writes every artifact into DIR
    python benchmarks/gpu_step.py --run DIR                   # GPU machine: torch, transformers, autosp runtime
    python benchmarks/gpu_step.py --run DIR --device cpu      # the same path on CPU (with a --tiny DIR)

DIR holds the model configs (config.json, no weights: every side builds the model with seed 0 via
autosp.frontend.load_model, so all configurations hold the same weights) and the artifacts, each
without program.mlir (the runtime does not read it), so DIR stays small: 43 artifacts (fp32 and bf16,
the common S and the simulation with cuda:90 kernel objects) in 39.7 MiB, written in ~4 minutes on 2 cores.
A DIR named *.autosp inside the repository is git-ignored; carry it.

The model: a Llama (hidden 1024, 4 layers, heads 16/8, intermediate 2816, vocab 32000; --tiny: hidden
64, 2 layers, vocab 256), batch 1, sp = 1. Precisions: fp32 (TF32 matmuls for the timings, TF32 off
for the correctness check) and bf16 (HF under torch.autocast(bfloat16) with fp32 parameters; autosp
compiled with precision="bf16" when the installed autosp has it, else its rows say so).
Every configuration runs under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (a value set in the
environment is kept): the cap then limits the memory the step uses, not the caching allocator's
fragmentation, for the baselines and autosp alike.

Configurations:
  HF eager           model(input_ids=, labels=, use_cache=False).loss.backward(), attn "sdpa"
  HF + gc            the same after model.gradient_checkpointing_enable()
  torch.compile(HF)  torch.compile(model) (inductor), same call; left out of the cap search (its
                     activations are eager's, and each S would recompile)
  ALST-style         HF + gc, the decoder's last hidden state through the LM head and the loss in
                     checkpointed chunks of --alst-chunk tokens (as ALST's tiled loss / Liger's fused
                     linear cross-entropy do): one chunk's logits live at a time
  autosp none|sac|auto   autosp.load(artifact, kernels=False) + load_state_dict: every op through ATen;
                     auto compiled with memory_budget = cap and reserve = 64 MiB (cuBLAS's and
                     cuBLASLt's workspaces, which the prediction does not count)
  ... +kernels       the same artifact (at the common S, compiled with cuda:90 kernel objects) with its
                     fused kernels launched from their objects (runtime/gpu_kernels.py)
  ... +kernels+graphs  and the step replayed as CUDA graphs (load(cuda_graphs=True): the first step
                     runs op by op, the second captures; the timed steps replay); its peak column is
                     torch.cuda.max_memory_reserved (the graphs' pool), the allocator's mark would
                     not see the memory the pool reuses. On CPU both variants run as the plain one

Sections:
  0. attention kernels: each CUDA path of runtime/kernels.py (FlashAttention-2 causal with grouped K/V,
     with a window, over packed documents as its varlen batch, with both; the efficient kernel in
     fp32 with a window and with documents) on the device against the CPU kernels' results on the
     same operands (dense masks), forward and backward: worst error over the largest value;
  1. correctness at the common S: loss relative error, worst gradient error (max |err| / max |grad|)
     and the least gradient cosine of each autosp configuration (and variant: a graphed one's third,
     replayed, step) vs HF eager in the same precision;
  2. step time (--warmup steps + median of --steps) and peak memory at the common S, each autosp
     prediction (plan.json predicted_peak_bytes) next to its measurement, and each autosp policy
     with kernels and with kernels + graphs; on CUDA the peak is
     torch.cuda.max_memory_allocated over a step (parameters, inputs, every activation and gradient;
     .grad set to None before it), as the prediction counts, less what the GPU held before the step
     beside the parameters, buffers and inputs (cuBLAS's workspace, kept from earlier matmuls: the
     device's, not the step's; the auto plans hold it out of the cap as a reserve); on CPU autosp's
     own live-bytes count, none for HF;
  3. the longest S of a ladder that runs under the cap (torch.cuda.set_per_process_memory_fraction;
     a probe fits when one step raises no torch.OutOfMemoryError); autosp runs the artifacts --compile
     made (it stops a ladder one S past a prediction above 1.25 x cap, or at the first S that `auto`
     cannot fit); on CPU there is no cap: every probe that runs fits;
  4. a per-rank simulation of sp = 8: a Llama-3.1-8B-shaped model with 2 layers at S = 64K and 128K
     compiled for sp = 8; one rank's program runs in a fake process group (torch.testing's FakeStore,
     backend "fake": collectives return without moving data). It simulates the last rank: its label
     halo is the fill value, so no collective's unfilled buffer reaches an index. Op by op (ATen)
     and with kernels + graphs (its artifacts carry cuda:90 objects): step time, peak,
     prediction, and model FLOP utilization: (6 x matmul parameters x tokens + 6 x layers x S^2 x
     attention width, causal) / sp per rank per step over the device's dense peak (bf16, or TF32 for
     fp32; H100/H200 known, else --peak-tflops).
Goals (PASS/FAIL, issue 10): autosp bf16 sac within 10% of its predicted peak; step time of none
<= 1.0x HF eager and of sac <= 1.15x torch.compile(HF) at the common S; sac reaches >= 8x the longest
S of HF + gc under the cap; auto reaches at least ALST-style's longest S and at that S steps in <= 0.9x
its time. Goals of issue 12, with kernels + graphs: bf16 sac <= 1.0x torch.compile(HF) and none <= 0.9x.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import json
import os
import statistics
import sys
import time
from typing import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from max_context import mib, parse_bytes  # noqa: E402

PRECISIONS = ("fp32", "bf16")
POLICIES = ("none", "sac", "auto")
# how an artifact runs: load() keywords by name suffix
VARIANTS = {"": {"kernels": False}, " +kernels": {"kernels": True},
            " +kernels+graphs": {"kernels": True, "cuda_graphs": True}}
SIM_VARIANTS = ("", " +kernels+graphs")
TARGETS = ("cuda:90",)            # H100 / H200; the artifacts at the common S carry their objects
HF = ("HF eager", "HF + gc", "torch.compile(HF)", "ALST-style")
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "tie_word_embeddings": False,
         "max_position_embeddings": 1 << 20}
SHAPES = {
    "full": {"model": {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 4,
                       "num_attention_heads": 16, "num_key_value_heads": 8, "vocab_size": 32000},
             # reserve: what CUDA's math libraries hold of the cap beside the step: cuBLAS's workspace (32 MiB per
             # stream on Hopper by default) and cuBLASLt's, which torch may keep apart
             "seq": 4096, "cap": "8GiB", "reserve": "64MiB", "ladder": [1024, 2048, 4096, 8192, 16384, 32768, 65536, 98304, 131072, 196608, 262144],
             "alst_chunk": 2048,
             # Llama-3.1-8B, 2 of its 32 layers
             "sim": {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 2,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                     "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
                     "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
             "sim_seqs": [65536, 131072]},
    "tiny": {"model": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256},
             "seq": 128, "cap": "3MiB", "reserve": 0, "ladder": [64, 128, 256, 512], "alst_chunk": 32,
             "sim": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 256},
             "sim_seqs": [256, 512]},
}
SIM_SP = 8
PREDICTION_MARGIN = 1.25          # the autosp ladders stop one S past a prediction above this x cap
# dense peak FLOP/s (bf16, tf32) by device name
PEAK_FLOPS = {"H200": (989.4e12, 494.7e12), "H100": (989.4e12, 494.7e12), "A100": (312e12, 156e12)}


# ------------------------------------------------------------------------------------- compile (CPU host)

def _write_config(path: str, cfg: dict) -> None:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({**LLAMA, **cfg}, f, indent=1)


def _compile_one(model, seq: int, sp: int, remat: str, precision: str, budget: int, out: str, rel: str,
                 targets: tuple[str, ...] = (), reserve: int | str = 0) -> dict:
    """One artifact into out/rel; {path, predicted, remat, compile_s} or {error}."""
    import autosp
    from autosp.frontend import CompileError
    kw: dict = {"remat": remat, "targets": targets}
    if remat == "auto":
        kw["memory_budget"], kw["reserve"] = budget, reserve
    if precision != "fp32":
        kw["precision"] = precision
    ids = torch.zeros(1, seq, dtype=torch.long)
    t = time.perf_counter()
    try:
        art = autosp.compile(model, (ids, ids.clone()), sp=sp, **kw)
    except CompileError as e:
        return {"error": f"compile: {str(e).splitlines()[0][:200]}"}
    del art.files["program.mlir"]         # for reading only: the runtime does not load it
    art.save(os.path.join(out, rel))
    plan = json.loads(art.files["plan.json"])
    return {"path": rel, "predicted": plan["memory"]["predicted_peak_bytes"],
            "remat": plan.get("auto", {}).get("chosen", remat), "compile_s": time.perf_counter() - t}


def compile_all(out: str, tiny: bool) -> None:
    import autosp
    from autosp.frontend import load_model
    t0 = time.perf_counter()
    shape = SHAPES["tiny" if tiny else "full"]
    cap = parse_bytes(shape["cap"])
    _write_config(os.path.join(out, "model"), shape["model"])
    _write_config(os.path.join(out, "sim-model"), shape["sim"])
    has_precision = "precision" in inspect.signature(autosp.compile).parameters
    unsupported = None if has_precision else \
        f"the installed autosp {autosp.__version__} has no compile(precision=...): bf16 artifacts not built"
    bench = {"tiny": tiny, "seq": shape["seq"], "cap": cap, "ladder": shape["ladder"], "alst_chunk": shape["alst_chunk"],
             "unsupported": {"bf16": unsupported} if unsupported else {}, "artifacts": {}, "sim": {}}
    model = load_model(f"hf:{out}/model", empty=True)
    for prec in PRECISIONS:
        if prec in bench["unsupported"]:
            print(f"  {prec}: {unsupported}", flush=True)
            continue
        for policy in POLICIES:
            for seq in [s for s in shape["ladder"] if s >= shape["seq"]]:      # below the common S all fit
                key = f"{prec}/{policy}/{seq}"
                r = _compile_one(model, seq, 1, policy, prec, cap, out, f"art/{prec}-{policy}-{seq}",
                                 TARGETS if seq == shape["seq"] else (), shape["reserve"])
                bench["artifacts"][key] = r
                print(f"  {key:18s} " + (f"predicted {mib(r['predicted'])} MiB ({r['remat']}), {r['compile_s']:.1f} s"
                                         if "path" in r else r["error"]), flush=True)
                if "error" in r or r["predicted"] > PREDICTION_MARGIN * cap:
                    break
    sim_prec = "bf16" if has_precision else "fp32"
    sim_model = load_model(f"hf:{out}/sim-model", empty=True)
    for seq in shape["sim_seqs"]:
        r = _compile_one(sim_model, seq, SIM_SP, "sac", sim_prec, cap, out, f"art/sim-sp{SIM_SP}-{seq}",
                         TARGETS)
        bench["sim"][str(seq)] = {**r, "precision": sim_prec}
        print(f"  sim sp={SIM_SP} S={seq:<7d} " + (f"predicted {mib(r['predicted'])} MiB per rank, {r['compile_s']:.1f} s"
                                                  if "path" in r else r["error"]), flush=True)
    bench["compile_s"] = time.perf_counter() - t0
    with open(os.path.join(out, "bench.json"), "w") as f:
        json.dump(bench, f, indent=1)
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out) for f in fs)
    print(f"wrote {out}: {len(bench['artifacts']) + len(bench['sim'])} artifacts, {size / 2 ** 20:.1f} MiB, "
          f"in {bench['compile_s']:.0f} s")


# ------------------------------------------------------------------------------------------ run (GPU)

class Device:
    def __init__(self, name: str):
        self.dev = torch.device(name)
        self.cuda = self.dev.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.dev)

    def autocast(self, precision: str):
        return torch.autocast(self.dev.type, dtype=torch.bfloat16, enabled=precision == "bf16")

    def free(self) -> None:
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()

    def cap(self, nbytes: int | None) -> None:
        if self.cuda:
            index = torch.cuda.current_device()   # the fraction is set per device index, not "cuda"
            total = torch.cuda.get_device_properties(index).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, nbytes / total) if nbytes else 1.0, index)


class Config:
    """One configuration, ready to step at one S: step() = forward + backward, .grad None before."""

    def __init__(self, name: str, module: torch.nn.Module, step: Callable, predicted: int | None = None,
                 remat: str | None = None, reserved: bool = False):
        self.name, self.module, self._step, self.predicted, self.remat = name, module, step, predicted, remat
        self.reserved = reserved

    def step(self, ids, labels) -> tuple[float, int | None]:
        """(loss, peak bytes of the step: CUDA allocator high-water mark less what was allocated before
        it beside the module's state and the inputs (reserved: of the memory reserved, the CUDA
        graphs' pool), or autosp's live bytes on CPU)."""
        self.module.zero_grad(set_to_none=True)
        cuda = ids.is_cuda
        if cuda:
            if self.reserved:
                torch.cuda.empty_cache()     # the default pool's cached blocks are not the step's
            torch.cuda.reset_peak_memory_stats(ids.device)
            from autosp.runtime.memory import resident_bytes   # each storage once (tied weights)
            state = resident_bytes([*self.module.parameters(), *self.module.buffers(), ids, labels])
            beside = torch.cuda.memory_allocated(ids.device) - state
        loss = self._step(ids, labels)
        if cuda:
            if self.reserved:
                return loss, torch.cuda.max_memory_reserved(ids.device)
            return loss, torch.cuda.max_memory_allocated(ids.device) - beside
        return loss, getattr(self.module, "peak_bytes", None)


def _chunk_loss(head: torch.nn.Module, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(head(h).float().flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")


def hf_config(name: str, model, precision: str, d: Device, chunk: int, compiled: dict) -> Config:
    """An HF baseline on `model` (already on the device); gradient checkpointing set as it needs."""
    if name in ("HF + gc", "ALST-style"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_disable()
    if name == "torch.compile(HF)" and "fn" not in compiled:
        compiled["fn"] = torch.compile(model)
    fn = compiled["fn"] if name == "torch.compile(HF)" else model

    def step(ids, labels) -> float:
        with d.autocast(precision):
            if name == "ALST-style":
                h = model.model(input_ids=ids, use_cache=False).last_hidden_state
                shift = F.pad(labels, (0, 1), value=-100)[:, 1:]
                total = sum(torch.utils.checkpoint.checkpoint(_chunk_loss, model.lm_head, h[:, i:i + chunk],
                                                              shift[:, i:i + chunk], use_reentrant=False)
                            for i in range(0, ids.shape[1], chunk))
                loss = total / (shift != -100).sum()
            else:
                loss = fn(input_ids=ids, labels=labels, use_cache=False).loss
        loss.backward()
        return loss.item()
    return Config(name, model, step)


def autosp_config(name: str, entry: dict, root: str, state: dict, d: Device, variant: str = "") -> Config:
    import autosp
    m = autosp.load(os.path.join(root, entry["path"]), **VARIANTS[variant])
    m.load_state_dict(state)
    m.to(d.dev)
    m.measure_memory = not d.cuda       # on CUDA the allocator's own mark, taken by Config.step

    def step(ids, labels) -> float:
        loss = m(ids, labels)
        loss.backward()
        return loss.item()
    return Config(name, m, step, entry["predicted"], entry["remat"], d.cuda and "cuda_graphs" in VARIANTS[variant])


def _timed(c: Config, ids, labels, d: Device, warmup: int, steps: int) -> dict:
    for _ in range(warmup):
        c.step(ids, labels)
    times, peak, loss = [], 0, None
    for _ in range(steps):
        d.sync()
        t = time.perf_counter()
        loss, p = c.step(ids, labels)
        d.sync()
        times.append(time.perf_counter() - t)
        peak = max(peak, p or 0)
    return {"time": statistics.median(times), "peak": peak or None, "loss": loss}


class Bench:
    def __init__(self, root: str, device: str, steps: int, warmup: int):
        from autosp.frontend import load_model
        with open(os.path.join(root, "bench.json")) as f:
            self.spec = json.load(f)
        self.root, self.d, self.steps, self.warmup = root, Device(device), steps, warmup
        self.hf = load_model(f"hf:{root}/model", seed=0)          # fp32 parameters, on the CPU until needed
        self.hf.train()
        self.state = {k: v.clone() for k, v in self.hf.state_dict().items()}
        self.vocab = self.hf.config.vocab_size
        self.compiled: dict = {}

    def inputs(self, seq: int):
        from autosp.verify import batch_for
        ids, labels = batch_for(self.vocab, [1, seq], seed=0)
        return ids.to(self.d.dev), labels.to(self.d.dev)

    def names(self, variants: bool = False) -> list[str]:
        """The configurations; variants: each autosp policy also with kernels and with kernels + graphs."""
        return [*HF, *(f"autosp {p}{v}" for p in POLICIES for v in (VARIANTS if variants else [""]))]

    @contextlib.contextmanager
    def config(self, name: str, precision: str, seq: int):
        """The configuration on the device, alone there (the HF model moves back to the CPU after)."""
        self.d.free()       # what an earlier probe's out-of-memory error held until it was handled
        if name.startswith("autosp"):
            why = self.spec["unsupported"].get(precision)
            _, policy, *variant = name.split()
            entry = self.spec["artifacts"].get(f"{precision}/{policy}/{seq}")
            if why or entry is None or "error" in entry:
                raise LookupError(why or (entry or {}).get("error") or f"no artifact compiled at S={seq}")
            c = autosp_config(name, entry, self.root, self.state, self.d, "".join(f" {v}" for v in variant))
            try:
                yield c
            finally:
                del c
                self.d.free()
        else:
            self.hf.to(self.d.dev)
            try:
                yield hf_config(name, self.hf, precision, self.d, self.spec["alst_chunk"], self.compiled)
            finally:
                self.hf.zero_grad(set_to_none=True)
                self.hf.to("cpu")
                self.d.free()

    # -------------------------------------------------------------------------------- sections
    def correctness(self) -> dict:
        seq = self.spec["seq"]
        ids, labels = self.inputs(seq)
        out = {}
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        for prec in PRECISIONS:
            with self.config("HF eager", prec, seq) as ref:
                ref_loss, _ = ref.step(ids, labels)
                want = {n: p.grad.detach().cpu() for n, p in ref.module.named_parameters()}
            for name in self.names(variants=True)[len(HF):]:
                try:
                    with self.config(name, prec, seq) as c:
                        for _ in range(3 if "graphs" in name else 1):   # the third step replays
                            loss, _ = c.step(ids, labels)
                        got = {n: p.grad.detach().cpu() for n, p in c.module.named_parameters()}
                except Exception as e:     # reported in its row; the other configurations still run
                    out[(prec, name)] = {"error": str(e).splitlines()[0][:120]}
                    continue
                err = max((got[n] - g).abs().max().item() / (g.abs().max().item() or 1.0) for n, g in want.items())
                cos = min(F.cosine_similarity(got[n].flatten().double(), g.flatten().double(), dim=0).item()
                          for n, g in want.items())
                out[(prec, name)] = {"loss": loss, "ref": ref_loss, "loss_err": abs(loss - ref_loss) / abs(ref_loss),
                                     "grad_err": err, "cos": cos}
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
        return out

    def run(self, name: str, prec: str, seq: int, steps: int, warmup: int) -> dict:
        ids, labels = self.inputs(seq)
        try:
            with self.config(name, prec, seq) as c:
                r = _timed(c, ids, labels, self.d, warmup, steps)
                r.update(predicted=c.predicted, remat=c.remat)
                return r
        except torch.OutOfMemoryError as e:
            return {"oom": True, "error": "out of memory: " + str(e).splitlines()[0][:100]}
        except Exception as e:     # reported in its row; the other configurations still run
            return {"error": str(e).splitlines()[0][:120]}

    def step_times(self) -> dict:
        return {(prec, n): self.run(n, prec, self.spec["seq"], self.steps, self.warmup)
                for prec in PRECISIONS for n in self.names(variants=True)}

    def longest(self) -> dict:
        """(precision, name) -> (longest S that ran under the cap, its run, why the next S did not)."""
        out = {}
        self.d.cap(self.spec["cap"])
        try:
            for prec in PRECISIONS:
                for n in self.names():
                    if n == "torch.compile(HF)":
                        continue
                    best, why = (0, None), "ladder end"
                    for seq in self.spec["ladder"]:
                        if n.startswith("autosp") and seq < self.spec["seq"]:
                            continue            # not compiled: the common S fits (section 2)
                        r = self.run(n, prec, seq, steps=1, warmup=0)
                        if "error" in r:
                            why = r["error"]
                            break
                        best = (seq, r)
                    out[(prec, n)] = (*best, why)
                    print(f"  {prec} {n:18s} longest S {best[0]:>7d}  (next: {why[:70]})", flush=True)
        finally:
            self.d.cap(None)
        return out

    def _simulate_one(self, seq: int, entry: dict, variant: str, cfg, peak_tflops: float | None) -> dict:
        import autosp
        if "error" in entry:
            return {"error": entry["error"]}
        m = c = None
        try:
            m = autosp.load(os.path.join(self.root, entry["path"]), **VARIANTS[variant]).to(self.d.dev)
            gen = torch.Generator(self.d.dev).manual_seed(0)
            with torch.no_grad():
                for p in m.parameters():
                    p.normal_(0.0, 0.02, generator=gen)
            m.measure_memory = not self.d.cuda
            c = Config("sim", m, lambda i, y: (lambda loss: (loss.backward(), loss.item())[1])(m(i, y)),
                       entry["predicted"], reserved=self.d.cuda and "cuda_graphs" in VARIANTS[variant])
            ids = torch.randint(0, cfg.vocab_size, (1, seq), device=self.d.dev, generator=gen)
            r = _timed(c, ids, ids.clone(), self.d, 2, max(2, self.steps // 2))   # a graphed step replays from the 3rd
        except Exception as e:     # reported in its row
            r = {"error": str(e).splitlines()[0][:120]}
        finally:
            m = c = None
            self.d.free()
        r.update(predicted=entry["predicted"], precision=entry["precision"], flops=model_flops(cfg, seq) / SIM_SP)
        peak = peak_tflops * 1e12 if peak_tflops else device_peak(self.d, entry["precision"])
        r["mfu"] = r["flops"] / r["time"] / peak if "time" in r and peak else None
        return r

    def simulate(self, peak_tflops: float | None) -> dict:
        """One rank of sp = 8 in a fake process group."""
        import torch.distributed as dist
        from torch.testing._internal.distributed.fake_pg import FakeStore

        from autosp.frontend import load_model
        cfg = load_model(f"hf:{self.root}/sim-model", empty=True).config
        dist.init_process_group("fake", store=FakeStore(), rank=SIM_SP - 1, world_size=SIM_SP)
        out = {}
        try:
            for seq, entry in self.spec["sim"].items():
                for variant in SIM_VARIANTS:
                    out[(int(seq), variant)] = self._simulate_one(int(seq), entry, variant, cfg, peak_tflops)
        finally:
            dist.destroy_process_group()
        return out


# (name, dtype, window, documents, ring block) of the attention checks: every kernel path of runtime/kernels.py;
# a ring block is the second half's queries against the first half's keys, as a ring rank attends an earlier block
ATTENTION_CASES = (("FA2 causal", torch.bfloat16, 0, False, False),
                   ("FA2 window 100", torch.bfloat16, 100, False, False),
                   ("FA2 varlen documents", torch.bfloat16, 0, True, False),
                   ("FA2 varlen + window", torch.bfloat16, 100, True, False),
                   ("FA2 varlen ring block", torch.bfloat16, 0, True, True),
                   ("efficient fp32 window", torch.float32, 100, False, False),
                   ("efficient fp32 docs", torch.float32, 0, True, False))
# of the largest value: bf16 roundings of the probabilities and their gradients over 512 keys reach 2e-2
# of it (an fp32 stand-in for FA2 against the CPU kernels); a wrong layout or document mixes rows: errors of
# the values' size
ATTENTION_TOLERANCE = 2 ** -4


def attention_check(d: Device) -> list[tuple[str, dict]]:
    """Each case's worst error (over the largest value of the CPU result) of out, lse, dq, dk, dv, for
    B=2, heads 8 / K/V 2, S=512, head dim 128; documents of 100, 212 and 200 tokens in row 0, one in
    row 1 (in a ring block, row 0's last document sees no key: lse -inf, counted as 0). Exceptions are
    reported in the case's row."""
    from autosp.runtime import kernels
    from autosp.runtime.documents import doc_positions
    b, h, hk, s, dim = 2, 8, 2, 512, 128
    pos = torch.tensor([[*range(100), *range(212), *range(200)], list(range(s))])
    g = torch.Generator().manual_seed(0)
    out = []
    for name, dtype, window, docs, block in ATTENTION_CASES:
        ops = [torch.randn(b, s, n, dim, generator=g).to(dtype).transpose(1, 2) for n in (h, hk, hk, h)]
        doc_pos = doc_positions(pos, None) if docs else None
        qs, ks = (slice(s // 2, s), slice(0, s // 2)) if block else (slice(None), slice(None))
        results = []
        try:
            for dev in ("cpu", d.dev):
                q, dout = (x[:, :, qs].to(dev) for x in (ops[0], ops[3]))
                k, v = (x[:, :, ks].to(dev) for x in ops[1:3])
                kw = {} if doc_pos is None else {"doc_pos": doc_pos[:, qs].to(dev)}
                if block:
                    kw["positions"] = (torch.arange(s // 2, s, device=dev), torch.arange(s // 2, device=dev))
                flags = (not block, dim ** -0.5, h // hk, window)
                o, lse = kernels.attention(q, k, v, *flags, **kw)
                # a ring's backward reads the merged statistics: finite where a block's are -inf
                grads = kernels.attention_grad(dout, q, k, v, o, lse.nan_to_num(neginf=0.0), *flags, **kw)
                results.append([x.float().cpu().nan_to_num(neginf=0.0) for x in (o, lse, *grads)])
            d.sync()
        except Exception as e:   # reported in its row; the other cases still run
            out.append((name, {"error": str(e).splitlines()[0][:120]}))
            continue
        out.append((name, {n: float((got - want).abs().max() / want.abs().max())
                           for n, got, want in zip(("out", "lse", "dq", "dk", "dv"), results[1], results[0])}))
    return out


def model_flops(cfg, seq: int, batch: int = 1) -> float:
    """Model FLOPs of one training step (forward + backward = 3 x forward), causal attention, no recompute."""
    h, layers, inter, vocab = cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size, cfg.vocab_size
    hd = getattr(cfg, "head_dim", None) or h // cfg.num_attention_heads
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    matmul_params = layers * (h * q + 2 * h * kv + q * h + 3 * h * inter) + h * vocab
    return 6 * batch * seq * matmul_params + 6 * layers * batch * seq * seq * q


def device_peak(d: Device, precision: str) -> float | None:
    if not d.cuda:
        return None
    name = torch.cuda.get_device_name(d.dev)
    for key, (bf16, tf32) in PEAK_FLOPS.items():
        if key in name:
            return bf16 if precision == "bf16" else tf32
    return None


# ------------------------------------------------------------------------------------------- report

def _ms(r: dict) -> str:
    return f"{r['time'] * 1e3:.1f}" if "time" in r else "-"


def report_attention(b: Bench, attention: list) -> None:
    print(f"\n0. attention kernels on {b.d.dev.type} vs the CPU kernels (worst error / largest value; "
          f"within {ATTENTION_TOLERANCE:.3g}: ok)")
    for name, r in attention:
        errs = "  ".join(f"{n} {e:.1e}" for n, e in r.items()) if "error" not in r else r["error"]
        ok = "error" not in r and max(r.values()) <= ATTENTION_TOLERANCE
        print(f"   {name:24s} {'ok  ' if ok else 'FAIL'} {errs}")


def report_correctness(b: Bench, correct: dict) -> None:
    print(f"\n1. correctness at S={b.spec['seq']} vs HF eager in the same precision (fp32: TF32 off)")
    print(f"   {'precision':9s} {'config':26s} {'loss':>12s} {'eager loss':>12s} {'loss rel err':>12s} "
          f"{'worst grad err':>14s} {'min cosine':>10s}")
    for (prec, n), r in correct.items():
        if "error" in r:
            print(f"   {prec:9s} {n:26s} {r['error']}")
        else:
            print(f"   {prec:9s} {n:26s} {r['loss']:>12.6f} {r['ref']:>12.6f} {r['loss_err']:>12.2e} "
                  f"{r['grad_err']:>14.2e} {r['cos']:>10.6f}")


def report_times(b: Bench, times: dict) -> None:
    seq = b.spec["seq"]
    print(f"\n2. step time (median of {b.steps} after {b.warmup} warmup) and peak at S={seq}"
          + ("" if b.d.cuda else " (CPU: peaks are autosp's own live bytes; HF has none)"))
    print(f"   {'config':26s} " + " | ".join(f"{p + ' ms':>9s} {'x eager':>7s} {'peak MiB':>9s} {'pred MiB':>9s} "
                                             f"{'meas/pred':>9s}" for p in PRECISIONS))
    for n in b.names(variants=True):
        cells = []
        for prec in PRECISIONS:
            r, base = times[(prec, n)], times[(prec, "HF eager")]
            if "time" not in r:
                cells.append(f"{r['error'][:54]:54s}")
                continue
            x = f"{r['time'] / base['time']:.2f}x" if "time" in base else "-"
            pred = r.get("predicted")
            ratio = f"{r['peak'] / pred:.3f}" if pred and r.get("peak") else "-"
            cells.append(f"{_ms(r):>9s} {x:>7s} {mib(r.get('peak')):>9s} {mib(pred):>9s} {ratio:>9s}")
        print(f"   {n:26s} " + " | ".join(cells))


def report_longest(b: Bench, longest: dict) -> None:
    spec = b.spec
    cap_note = f"under a {mib(spec['cap'])} MiB cap" if b.d.cuda else "(CPU: no cap, every probe that runs fits)"
    print(f"\n3. longest S of {spec['ladder']} {cap_note}")
    print(f"   {'config':18s} " + " | ".join(f"{p + ' S':>8s} {'x gc':>6s} {'peak MiB':>9s} {'pred MiB':>9s}"
                                             for p in PRECISIONS) + "   (next S)")
    for n in b.names():
        if n == "torch.compile(HF)":
            continue
        cells, whys = [], []
        for prec in PRECISIONS:
            s, r, why = longest[(prec, n)]
            gc_s = longest[(prec, "HF + gc")][0]
            x = f"{s / gc_s:.1f}x" if gc_s and s else "-"
            cells.append(f"{s:>8d} {x:>6s} {mib(r.get('peak') if r else None):>9s} "
                         f"{mib(r.get('predicted') if r else None):>9s}")
            whys.append(why[:40])
        print(f"   {n:18s} " + " | ".join(cells) + "   (" + "; ".join(whys) + ")")


def report_simulation(b: Bench, sim: dict) -> None:
    spec = b.spec
    print(f"\n4. per-rank simulation of sp={SIM_SP} (one rank, fake process group): Llama-3.1-8B shape, "
          f"{'tiny' if spec['tiny'] else '2 layers'}")
    print(f"   {'S':>7s} {'precision':9s} {'variant':16s} {'step ms':>9s} {'peak MiB':>9s} {'pred MiB':>9s} {'meas/pred':>9s} "
          f"{'TFLOP/rank':>10s} {'MFU':>6s}")
    for (seq, variant), r in sim.items():
        variant = variant.strip() or "ATen"
        if "time" not in r:
            print(f"   {seq:>7d} {r.get('precision', '-'):9s} {variant:16s} {r['error']}")
            continue
        ratio = f"{r['peak'] / r['predicted']:.3f}" if r.get("peak") else "-"
        mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") else "-"
        print(f"   {seq:>7d} {r['precision']:9s} {variant:16s} {_ms(r):>9s} {mib(r.get('peak')):>9s} {mib(r['predicted']):>9s} "
              f"{ratio:>9s} {r['flops'] / 1e12:>10.2f} {mfu:>6s}")


def goals(b: Bench, times: dict, longest: dict) -> None:
    print("\ngoals" + ("" if b.d.cuda else " (CPU: not the goals' setting, the path only)"))

    def line(ok: bool | None, text: str) -> None:
        print(f"  {'PASS' if ok else ('FAIL' if ok is not None else 'n/a ')}  {text}")

    r = times[("bf16", "autosp sac")]
    ok = abs(r["peak"] / r["predicted"] - 1) <= 0.10 if r.get("peak") and r.get("predicted") else None
    line(ok, "autosp bf16 sac peak within 10% of its prediction: "
             + (f"{mib(r['peak'])} vs {mib(r['predicted'])} MiB" if ok is not None else r.get("error", "no measurement")))
    for prec in PRECISIONS:
        kernel_goals = (("autosp none +kernels+graphs", "torch.compile(HF)", 0.9),   # issue 12: bf16
                        ("autosp sac +kernels+graphs", "torch.compile(HF)", 1.0)) if prec == "bf16" else ()
        for a, base, goal in (("autosp none", "HF eager", 1.0), ("autosp sac", "torch.compile(HF)", 1.15),
                              *kernel_goals):
            ra, rb = times[(prec, a)], times[(prec, base)]
            ok = ra["time"] / rb["time"] <= goal if "time" in ra and "time" in rb else None
            line(ok, f"{prec} {a} step <= {goal}x {base}: " + (f"{_ms(ra)} vs {_ms(rb)} ms = {ra['time'] / rb['time']:.2f}x"
                                                             if ok is not None else (ra.get("error") or rb.get("error"))))
        why = b.spec["unsupported"].get(prec)
        if why:
            line(None, f"{prec} longest S of autosp sac and auto: {why}")
            continue
        s_sac, s_gc = longest[(prec, "autosp sac")][0], longest[(prec, "HF + gc")][0]
        line(s_sac >= 8 * s_gc if s_gc else None, f"{prec} autosp sac longest S {s_sac} >= 8x HF + gc's {s_gc}")
        s_auto, s_alst = longest[(prec, "autosp auto")][0], longest[(prec, "ALST-style")][0]
        text = f"{prec} autosp auto longest S {s_auto} >= ALST-style's {s_alst}"
        if s_auto < s_alst or not s_alst:
            line(False if s_alst else None, text)
            continue
        b.d.cap(b.spec["cap"])
        try:
            ra, rb = (b.run(n, prec, s_alst, b.steps, 1) for n in ("autosp auto", "ALST-style"))
        finally:
            b.d.cap(None)
        ok = ra["time"] <= 0.9 * rb["time"] if "time" in ra and "time" in rb else None
        line(ok, text + f"; at S={s_alst} auto {_ms(ra)} ms vs ALST-style {_ms(rb)} ms (goal <= 0.9x)"
             + ("" if ok is not None else f": {ra.get('error') or rb.get('error')}"))


def run_all(args) -> None:
    t0 = time.perf_counter()
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")   # read when CUDA starts
    b = Bench(args.run, args.device, args.steps, args.warmup)
    if b.d.cuda:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        props = torch.cuda.get_device_properties(b.d.dev)
        where = f"{props.name}, {props.total_memory / 2 ** 30:.0f} GiB, {os.environ['PYTORCH_CUDA_ALLOC_CONF']}"
    else:
        torch.set_num_threads(args.threads)
        where = f"CPU, {torch.get_num_threads()} thread(s)"
    cfg = b.hf.config
    print(f"model: Llama hidden {cfg.hidden_size}, {cfg.num_hidden_layers} layers, heads {cfg.num_attention_heads}/"
          f"{cfg.num_key_value_heads}, intermediate {cfg.intermediate_size}, vocab {cfg.vocab_size}, batch 1, sp=1; "
          f"{where}; torch {torch.__version__}")
    for prec, why in b.spec["unsupported"].items():
        print(f"note: {prec}: {why}")
    # each section's table as soon as it is measured, line by line: a run cut short still shows what it measured
    sys.stdout.reconfigure(line_buffering=True)
    report_attention(b, attention_check(b.d))
    print("\n1. correctness ...")
    report_correctness(b, b.correctness())
    print("\n2. step times ...")
    times = b.step_times()
    report_times(b, times)
    print("\n3. longest S under the cap ...")
    longest = b.longest()
    report_longest(b, longest)
    print("\n4. per-rank simulation ...")
    report_simulation(b, b.simulate(args.peak_tflops))
    goals(b, times, longest)
    print(f"total {time.perf_counter() - t0:.0f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--compile", metavar="DIR", help="compile every artifact into DIR (needs torch-mlir)")
    g.add_argument("--run", metavar="DIR", help="run the benchmark on the artifacts in DIR")
    p.add_argument("--tiny", action="store_true", help="tiny shapes (with --compile; --run takes DIR's shapes)")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--steps", type=int, default=5, help="timed steps per configuration (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument("--threads", type=int, default=1, help="torch threads on CPU (default 1)")
    p.add_argument("--peak-tflops", type=float, default=None, help="dense peak for MFU (default: by device name)")
    args = p.parse_args()
    if args.compile:
        compile_all(args.compile, args.tiny)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
