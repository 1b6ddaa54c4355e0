"""Longest sequence that fits a memory budget, and step time, for eager PyTorch and autosp (sp = 1, CPU).

Configurations, all the same Hugging Face `LlamaForCausalLM` config (written to a temp dir as
config.json; every process builds it with `autosp.frontend.load_model("hf:DIR")`, seed 0, so all
hold identical weights and report the same loss at equal S):

  eager            model(input_ids=, labels=, use_cache=False).loss.backward(), attn "sdpa"
  eager+gc         the same after model.gradient_checkpointing_enable() (transformers' own, per layer)
  eager+sac        torch selective activation checkpointing, torchtitan style: every decoder layer's
                   forward wrapped in torch.utils.checkpoint.checkpoint(..., use_reentrant=False,
                   context_fn=create_selective_checkpoint_contexts(policy)); the policy MUST_SAVEs the
                   outputs of aten.mm / addmm / max and the SDPA kernels (flash-for-cpu, flash,
                   efficient), everything else PREFER_RECOMPUTE (torchtitan's `_save_list`; its
                   "recompute every second mm" refinement is not used)
  autosp none|full|sac   autosp.compile(hf model, sp=1, remat=...) -> save -> autosp.load ->
                   load_state_dict; m(ids, labels).backward()
  autosp auto      remat="auto", memory_budget = the benchmark budget (bytes)
  (-notile rows)   autosp sac / auto with tile=0: the LM head + loss not chunked (autosp.compile's
                   default is tile="auto"; --no-tile skips these rows)

What is measured. Every probe is a FRESH subprocess (this script with --child) on one CPU rank, no
process group, torch.set_num_threads(1) (so step times compare the work each side issues, not how
well it parallelizes, and are stable on a shared machine). The child builds the model (autosp: loads
the artifact the parent compiled and saved, then the weights; the source model is deleted), makes
the inputs, runs one warmup step at the same S, then for each measured step: zero_grad(set_to_none),
gc.collect(), malloc_trim(0), baseline = VmRSS, reset the kernel's RSS high-water mark by writing
"5" to /proc/self/clear_refs, one step (forward + backward), peak = VmHWM. memory = peak - baseline
(max over the measured steps): the activations, the .grad tensors and every transient of the
step; the parameters (resident before the step) are not counted. getrusage's ru_maxrss cannot be
used: it is monotonic over the process lifetime (it would include the model build / the warmup).
VmHWM is exact (kept by the kernel, not sampled). The reset was checked to work on this machine;
if it fails the child reports it and the probe is marked unreliable ("!" in the table).
The children run with MALLOC_MMAP_THRESHOLD_=65536 (glibc): every allocation above 64 KiB gets its
own mmap and is returned to the OS on free, so RSS follows the live tensor bytes instead of
glibc's dynamic threshold keeping freed tensors in the heap (which makes the baseline after a
warmup step depend on fragmentation). --malloc-default turns this off. VmHWM stays exact with it:
the kernel records the RSS into the high-water mark before every munmap, and RSS only grows between
them. The timing runs (below) do not set it: one fresh mmap per large tensor costs page faults
(eager at S=1536 here: 0.63 s with it, 0.55 s without), and they report the memory they see with
the default allocator only for information (eager at S=1536: 205 MiB against 160 MiB measured
with the threshold: the freed tensors glibc keeps).

Longest S: S in multiples of --granularity (128); doubling from --start until a probe does not
fit, then a bisection of the bracket whose split point is interpolated from the two ends' measured
memory (memory is affine in S for all configurations here: CPU SDPA keeps no S x S state), rounded
to the granularity and kept strictly inside the bracket; a probe fits when it ran (no error, no
--probe-timeout) and memory <= budget. For autosp the parent compiles each probed S; remat="auto"
that cannot fit fails to compile, which counts as "does not fit". For autosp rows the compiler's
prediction at the found S is printed next to the measurement: `predicted_peak_bytes` of plan.json,
and that minus the parameters and inputs (resident before the step, so comparable to the measured
memory).

Step time: at a common S (--common-seq, default: the longest S of eager), each configuration in
its own fresh subprocess, serially, with glibc's default malloc settings: one warmup step, then the
median of --steps steps. Every child prints the loss of its first step: all configurations agree
at equal S (same weights, same inputs), a check that they compute the same step.

Goals (PASS/FAIL lines): autosp sac reaches >= 2.5x the S of eager at <= 1.15x its step time (at
the common S); autosp auto never exceeds the budget (every auto probe that compiled; the
timing runs use the default allocator, see above) and is never slower than autosp full at equal S (<= 1.05x, the timing noise allowance;
compared at the common S and, when different, at auto's longest S, with extra timing runs of both
there; an S where auto does not compile because no policy's prediction fits is not a comparison).
Note: memory_budget for auto is compared by the compiler with `predicted_peak_bytes`, which
includes the parameters and inputs, while the measured memory here does not: auto is that much
more conservative than the budget (passing the budget unchanged was the benchmark's specification).

    python benchmarks/max_context.py                    # default config and budget
    python benchmarks/max_context.py --quick            # smaller model, budget, fewer steps
    python benchmarks/max_context.py --budget 256MiB --common-seq 2048 --jobs 2
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from autosp.units import parse_bytes

GOAL_SAC_SEQ = 2.5
GOAL_SAC_TIME = 1.15
AUTO_VS_FULL_TOL = 1.05

EAGER = ("eager", "eager+gc", "eager+sac")

FULL_MODEL = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
              "intermediate_size": 688, "vocab_size": 2048}
QUICK_MODEL = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "intermediate_size": 344, "vocab_size": 1024}
FULL_BUDGET = "160MiB"
QUICK_BUDGET = "40MiB"


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2 ** 20:.1f}"


# ----------------------------------------------------------------------------------------- child

def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) * 1024
    return out


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    s = _status()
    # VmRSS is read from lazily synced per-CPU counters: allow some slack; a failed reset would leave
    # the warmup step's peak here, i.e. the whole step's memory above the current RSS
    return s["VmHWM"] <= s["VmRSS"] + 4 * 2 ** 20


def _trim() -> None:
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _sac_wrap(model) -> None:
    """torchtitan-style op-level SAC on every decoder layer."""
    import torch
    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )
    aten = torch.ops.aten
    save = {aten.mm.default, aten.addmm.default, aten.max.default,
            aten._scaled_dot_product_flash_attention_for_cpu.default,
            aten._scaled_dot_product_flash_attention.default,
            aten._scaled_dot_product_efficient_attention.default}

    def policy(ctx, func, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if func in save else CheckpointPolicy.PREFER_RECOMPUTE

    def context_fn():
        return create_selective_checkpoint_contexts(policy)

    for layer in model.model.layers:
        inner = layer.forward

        def forward(*args, _inner=inner, **kwargs):
            return checkpoint(_inner, *args, use_reentrant=False, context_fn=context_fn, **kwargs)
        layer.forward = forward


def child(spec: dict) -> dict:
    import gc

    import torch
    torch.set_num_threads(spec["threads"])
    from autosp.frontend import load_model
    src = load_model(f"hf:{spec['config_dir']}", seed=spec["seed"])
    kind = spec["kind"]
    if kind in EAGER:
        model = src
        model.train()
        if kind == "eager+gc":
            model.gradient_checkpointing_enable()
        elif kind == "eager+sac":
            _sac_wrap(model)

        def step(ids, labels):
            loss = model(input_ids=ids, labels=labels, use_cache=False).loss
            loss.backward()
            return loss
    else:
        import autosp
        model = autosp.load(spec["artifact"])
        model.load_state_dict(src.state_dict())
        del src

        def step(ids, labels):
            loss = model(ids, labels)
            loss.backward()
            return loss
    gc.collect()
    gen = torch.Generator().manual_seed(spec["seed"])
    s, vocab = spec["seq"], spec["vocab"]
    ids = torch.randint(0, vocab, (1, s), generator=gen)
    labels = torch.randint(0, vocab, (1, s), generator=gen)
    t = time.perf_counter()
    loss = step(ids, labels).item()
    warm = time.perf_counter() - t
    times, mems, reliable = [], [], True
    for _ in range(spec["steps"]):
        model.zero_grad(set_to_none=True)
        gc.collect()
        _trim()
        base = _status()["VmRSS"]
        reliable &= _reset_hwm()
        t = time.perf_counter()
        step(ids, labels)
        times.append(time.perf_counter() - t)
        mems.append(_status()["VmHWM"] - base)
    return {"loss": loss, "warmup_s": warm, "times": times, "memory": max(mems), "memories": mems,
            "baseline": base, "reliable": reliable}


# ---------------------------------------------------------------------------------------- parent

class Bench:
    def __init__(self, args: argparse.Namespace, workdir: str):
        self.args, self.workdir = args, workdir
        self.budget = parse_bytes(args.budget)
        self.model_cfg = QUICK_MODEL if args.quick else FULL_MODEL
        self.config_dir = os.path.join(workdir, "config")
        import transformers
        cfg = transformers.LlamaConfig(**self.model_cfg, max_position_embeddings=1 << 20, tie_word_embeddings=False)
        cfg.save_pretrained(self.config_dir)
        self.compile_lock = threading.Lock()
        self._meta_model = None
        self.compiled: dict[tuple[str, int], dict] = {}
        self.log_lock = threading.Lock()
        self.probes: dict[str, list[dict]] = {}

    def log(self, msg: str) -> None:
        with self.log_lock:
            print(msg, flush=True)

    # autosp configurations: name -> (remat, tile)
    @staticmethod
    def autosp_setting(name: str) -> tuple[str, str | None]:
        rest = name.removeprefix("autosp ")
        remat, _, tile = rest.partition("-")
        return remat, (0 if tile == "notile" else None)

    def compile(self, name: str, seq: int) -> dict:
        """Compile (once per name and S) in this process; returns {artifact, plan} or {error}."""
        key = (name, seq)
        with self.compile_lock:
            if key in self.compiled:
                return self.compiled[key]
            import autosp
            import torch
            from autosp.frontend import CompileError, load_model
            if self._meta_model is None:
                self._meta_model = load_model(f"hf:{self.config_dir}", empty=True)
            remat, tile = self.autosp_setting(name)
            kw = {"remat": remat}
            if remat == "auto":
                kw["memory_budget"] = self.budget
            if tile is not None:
                kw["tile"] = tile
            ids = torch.zeros(1, seq, dtype=torch.long)
            t = time.perf_counter()
            try:
                art = autosp.compile(self._meta_model, example_inputs=(ids, ids.clone()), sp=1, **kw)
            except CompileError as e:
                out = {"error": f"compile: {str(e).splitlines()[0][:160]}"}
            else:
                path = art.save(os.path.join(self.workdir, f"{name.replace(' ', '_').replace('+', '_')}_{seq}.autosp"))
                plan = json.loads(art.files["plan.json"])
                mem = plan["memory"]
                where = {f: (v.index(max(v)), len(v), max(v)) for f, v in plan.get("timeline", {}).items() if v}
                f_peak = max(where, key=lambda f: where[f][2]) if where else "?"
                out = {"artifact": path, "remat": plan.get("auto", {}).get("chosen", plan["remat"]),   # auto: the plan
                       "peak_at": f"@{f_peak} {where[f_peak][0]}/{where[f_peak][1]}" if where else "?",
                       "predicted": mem["predicted_peak_bytes"],
                       "predicted_step": mem["predicted_peak_bytes"] - mem.get("parameters", 0) - mem.get("inputs", 0),
                       "compile_s": time.perf_counter() - t}
            self.compiled[key] = out
            return out

    def run_child(self, name: str, seq: int, steps: int, timeout: float, timing: bool = False) -> dict:
        spec = {"kind": name, "seq": seq, "steps": steps, "config_dir": self.config_dir, "seed": self.args.seed,
                "threads": self.args.threads, "vocab": self.model_cfg["vocab_size"]}
        extra = {}
        if name.startswith("autosp"):
            c = self.compile(name, seq)
            if "error" in c:
                return {"fits": False, "error": c["error"]}
            spec["artifact"] = c["artifact"]
            extra = {k: c[k] for k in ("predicted", "predicted_step", "remat", "peak_at")}
        env = dict(os.environ)
        if not self.args.malloc_default and not timing:
            env["MALLOC_MMAP_THRESHOLD_"] = "65536"
        env.setdefault("PYTHONWARNINGS", "ignore")
        t = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)], check=False, env=env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"fits": False, "error": f"timeout {timeout:.0f}s", **extra}
        wall = time.perf_counter() - t
        line = next((ln for ln in p.stdout.splitlines()[::-1] if ln.startswith("RESULT ")), None)
        if p.returncode != 0 or line is None:
            tail = (p.stderr.strip().splitlines() or ["?"])[-1]
            return {"fits": False, "error": f"rc {p.returncode}: {tail[:160]}", **extra}
        r = json.loads(line[len("RESULT "):])
        r.update(extra, wall_s=wall, fits=r["memory"] <= self.budget and not timing)
        return r

    def probe(self, name: str, seq: int) -> dict:
        r = self.run_child(name, seq, steps=1, timeout=self.args.probe_timeout)
        r["seq"] = seq
        self.probes.setdefault(name, []).append(r)
        what = (f"{mib(r['memory'])} MiB" + ("" if r.get("reliable", True) else " (HWM reset failed!)")
                if "memory" in r else r["error"])
        pred = f", predicted step {mib(r['predicted_step'])} MiB ({r['remat']})" if "predicted_step" in r else ""
        t = f", step {r['times'][0]:.2f}s, wall {r['wall_s']:.1f}s" if "times" in r else ""
        self.log(f"  {name:18s} S={seq:>6d}: {what}{pred}{t} -> {'fits' if r['fits'] else 'no'}")
        return r

    def longest(self, name: str) -> tuple[int, dict | None]:
        g, a = self.args.granularity, self.args
        lo, lo_r, hi, hi_r = 0, None, None, None
        s = max(g, a.start // g * g)
        while s <= a.max_seq:                                  # doubling
            r = self.probe(name, s)
            if r["fits"]:
                lo, lo_r = s, r
                s *= 2
            else:
                hi, hi_r = s, r
                break
        if hi is None:
            return lo, lo_r
        if lo == 0:                                            # even the start does not fit: go down
            s = hi // 2 // g * g
            while s >= g:
                r = self.probe(name, s)
                if r["fits"]:
                    lo, lo_r = s, r
                    break
                hi, hi_r, s = s, r, s // 2 // g * g
            if lo == 0:
                return 0, None
        for _ in range(a.max_probes):                         # bisection, interpolated split
            if hi - lo <= g:
                break
            mid = (lo + hi) // 2 // g * g
            if lo_r is not None and hi_r is not None and "memory" in hi_r and hi_r["memory"] > lo_r["memory"]:
                slope = (hi_r["memory"] - lo_r["memory"]) / (hi - lo)
                guess = lo + (self.budget - lo_r["memory"]) / slope
                mid = int(guess) // g * g
                if mid == lo and lo + g < hi:                  # very close above lo: check lo + g
                    mid = lo + g
            mid = min(max(mid, lo + g), hi - g)
            r = self.probe(name, mid)
            if r["fits"]:
                lo, lo_r = mid, r
                if lo + g < hi:                                # interpolation lands just below: confirm
                    r2 = self.probe(name, lo + g)
                    if r2["fits"]:
                        lo, lo_r = lo + g, r2
                    else:
                        hi, hi_r = lo + g, r2
            else:
                hi, hi_r = mid, r
        return lo, lo_r


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--budget", default=None, help=f"memory budget per step, e.g. 160MiB (default {FULL_BUDGET}, "
                                                  f"--quick {QUICK_BUDGET})")
    p.add_argument("--quick", action="store_true", help="smaller model and budget, fewer timed steps")
    p.add_argument("--common-seq", type=int, default=None, help="S of the step-time comparison (default: eager's longest S)")
    p.add_argument("--steps", type=int, default=None, help="timed steps at the common S, after 1 warmup (default 5, --quick 3)")
    p.add_argument("--start", type=int, default=None, help="first S of the doubling (default 512)")
    p.add_argument("--granularity", type=int, default=128, help="S is a multiple of this (default 128)")
    p.add_argument("--max-seq", type=int, default=65536, help="stop doubling above this (default 65536)")
    p.add_argument("--max-probes", type=int, default=6, help="bisection probes per configuration (default 6, --quick 3)")
    p.add_argument("--probe-timeout", type=float, default=240, help="seconds per probe subprocess (default 240)")
    p.add_argument("--jobs", type=int, default=1, help="configurations searched concurrently (default 1; step "
                                                       "times at the common S are always measured alone)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads in every child (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-tile", action="store_true", help="skip the autosp tile=0 rows")
    p.add_argument("--only", default=None, help="comma-separated subset of configurations")
    p.add_argument("--malloc-default", action="store_true", help="do not set MALLOC_MMAP_THRESHOLD_ in the children")
    args = p.parse_args()
    if args.child:
        r = child(json.loads(args.child))
        print("RESULT " + json.dumps(r), flush=True)
        return
    args.budget = args.budget or (QUICK_BUDGET if args.quick else FULL_BUDGET)
    args.steps = args.steps or (3 if args.quick else 5)
    args.start = args.start or 512
    if args.quick and args.max_probes == 6:
        args.max_probes = 3

    import torch
    names = ["eager", "eager+gc", "eager+sac", "autosp none", "autosp full", "autosp sac", "autosp auto"]
    if not args.no_tile:
        names += ["autosp sac-notile", "autosp auto-notile"]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="max_context_") as workdir:
        b = Bench(args, workdir)
        cfg = b.model_cfg
        print(f"model: LlamaForCausalLM hidden {cfg['hidden_size']}, {cfg['num_hidden_layers']} layers, heads "
              f"{cfg['num_attention_heads']}/{cfg['num_key_value_heads']}, intermediate {cfg['intermediate_size']}, "
              f"vocab {cfg['vocab_size']}, fp32, batch 1, sp=1 on CPU; budget {mib(b.budget)} MiB per step "
              f"(peak RSS - idle RSS); {args.threads} thread(s) per fresh process; torch {torch.__version__}; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"searching the longest S (multiples of {args.granularity}, from {args.start}):", flush=True)
        results: dict[str, tuple[int, dict | None]] = {}
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
            futs = {n: ex.submit(b.longest, n) for n in names}
            for n in names:
                results[n] = futs[n].result()
        base_seq = results.get("eager", (0, None))[0]
        common = args.common_seq or base_seq or 1024
        print(f"step time at the common S = {common} (1 warmup + median of {args.steps} steps, each "
              f"configuration alone in a fresh process):", flush=True)
        timing: dict[str, dict] = {}
        for n in names:
            r = b.run_child(n, common, steps=args.steps, timeout=args.probe_timeout * (1 + args.steps),
                            timing=True)
            timing[n] = r
            if "times" in r:
                b.log(f"  {n:18s} {statistics.median(r['times']):.3f}s  memory {mib(r['memory'])} MiB  "
                      f"loss {r['loss']:.6f}" + (f"  ({r['remat']})" if "remat" in r else ""))
            else:
                b.log(f"  {n:18s} {r['error']}")

        extra_timing: dict[str, dict] = {}
        s_auto = results.get("autosp auto", (0, None))[0]
        if "autosp full" in names and s_auto and s_auto != common:
            print(f"auto vs full also at auto's longest S = {s_auto}:", flush=True)
            for n in ("autosp auto", "autosp full"):
                r = b.run_child(n, s_auto, steps=args.steps, timeout=args.probe_timeout * (1 + args.steps),
                            timing=True)
                extra_timing[n] = r
                b.log(f"  {n:18s} " + (f"{statistics.median(r['times']):.3f}s  memory {mib(r['memory'])} MiB  "
                                       f"({r.get('remat')})" if "times" in r else r["error"]))

    # ------------------------------------------------------------------------------------ tables
    def med(n):
        r = timing.get(n, {})
        return statistics.median(r["times"]) if "times" in r else None
    t_base = med("eager")
    print()
    head = (f"{'configuration':18s} {'longest S':>9s} {'x eager':>7s} {'meas MiB':>9s} {'pred MiB':>9s} "
            f"{'pred-params':>11s} {'policy':>6s} | {'step s @' + str(common):>12s} {'x eager':>7s} {'RSS* @S':>7s}")
    print(head)
    print("-" * len(head))
    for n in names:
        s, r = results[n]
        ratio = f"{s / base_seq:.2f}x" if base_seq else "-"
        meas = mib(r["memory"]) + ("" if r.get("reliable", True) else "!") if r else "-"
        pred = mib(r.get("predicted")) if r else "-"
        pstep = mib(r.get("predicted_step")) if r else "-"
        pol = (r.get("remat") or "-") if r else "-"
        t = med(n)
        tr = f"{t / t_base:.2f}x" if t and t_base else "-"
        tm = mib(timing[n].get("memory")) if "memory" in timing.get(n, {}) else "-"
        ts = f"{t:.3f}" if t else timing.get(n, {}).get("error", "-")[:12]
        print(f"{n:18s} {s:>9d} {ratio:>7s} {meas:>9s} {pred:>9s} {pstep:>11s} {pol:>6s} | {ts:>12s} {tr:>7s} {tm:>7s}")
    print("(meas = measured step memory at the longest S; pred = plan.json predicted_peak_bytes there, "
          "pred-params = that minus parameters and inputs, comparable to meas; policy = the remat auto chose; "
          "RSS* @S = peak - idle RSS of the timing run at the common S, default malloc, not comparable to the budget)")
    notes = [f"{n} @{results[n][0]}: {results[n][1]['peak_at']}" for n in names
             if results[n][1] is not None and "peak_at" in results[n][1]]
    if notes:
        print("where sp-plan-memory puts the peak (program, instruction index / count): " + "; ".join(notes))

    # ------------------------------------------------------------------------------------- goals
    if "autosp sac" in results and "eager" in results:
        s_sac = results["autosp sac"][0]
        t_sac = med("autosp sac")
        seq_ok = base_seq > 0 and s_sac >= GOAL_SAC_SEQ * base_seq
        time_ok = t_sac is not None and t_base is not None and t_sac <= GOAL_SAC_TIME * t_base
        print(f"{'PASS' if seq_ok and time_ok else 'FAIL'}  autosp sac: longest S {s_sac} = "
              f"{s_sac / base_seq if base_seq else float('nan'):.2f}x eager's {base_seq} (goal >= {GOAL_SAC_SEQ}x), "
              f"step time at S={common} {t_sac / t_base if t_sac and t_base else float('nan'):.2f}x eager "
              f"(goal <= {GOAL_SAC_TIME}x)")
    if "autosp auto" in results:
        runs = [r for r in b.probes.get("autosp auto", []) if "memory" in r]
        over = [r for r in runs if r["memory"] > b.budget]
        worst = max((r["memory"] for r in runs), default=0)
        print(f"{'PASS' if runs and not over else 'FAIL'}  autosp auto never exceeds the budget: {len(runs)} "
              f"compiled probes, worst {mib(worst)} MiB vs budget {mib(b.budget)} MiB"
              + (f"; over at S={[r['seq'] for r in over]}" if over else ""))
        if "autosp full" in results:
            def mt(tab, n):
                r = tab.get(n, {})
                return statistics.median(r["times"]) if "times" in r else None
            checks = [(common, timing)] + ([(s_auto, extra_timing)] if extra_timing else [])
            parts, ok, made = [], True, 0
            for seq, tab in checks:         # an S where auto does not compile (nothing fits) is no comparison
                ta, tf = mt(tab, "autosp auto"), mt(tab, "autosp full")
                if ta is None or tf is None:
                    err = (tab.get("autosp auto", {}).get("error") or tab.get("autosp full", {}).get("error") or "?")
                    parts.append(f"S={seq}: not compared ({err[:90]})")
                    continue
                made += 1
                ok = ok and ta <= AUTO_VS_FULL_TOL * tf
                parts.append(f"S={seq}: {ta:.3f}s vs {tf:.3f}s = {ta / tf:.2f}x (chose {tab['autosp auto'].get('remat')})")
            ok = ok and made > 0
            print(f"{'PASS' if ok else 'FAIL'}  autosp auto not slower than autosp full at equal S (goal <= "
                  f"{AUTO_VS_FULL_TOL}x, the noise allowance): " + "; ".join(parts))
    print(f"total {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
