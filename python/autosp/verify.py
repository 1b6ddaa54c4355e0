"""Compare the compiled program on N ranks with the eager model on one process."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autosp.frontend.sources import load_model, vocab_size
from autosp.runtime.collectives import DEFAULT_TIMEOUT_S


FP32_EPS = torch.finfo(torch.float32).eps


@dataclass
class Report:
    loss: float                        # the compiled step's loss (last step)
    eager_loss: float
    loss_rel_err: float                # worst over the steps
    worst: list[tuple[str, float]]     # (parameter, max|err| / max|grad|) worst over the steps, worst first
    steps: int = 1

    def ok(self, tol: float = 1e-5) -> bool:
        return self.loss_rel_err <= tol and all(e <= tol for _, e in self.worst)


def batch_for(spec_vocab: int, shape: list[int], seed: int, ignore_every: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic random tokens; every `ignore_every`-th label is ignore_index (-100)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, spec_vocab, shape, generator=g)
    labels = torch.randint(0, spec_vocab, shape, generator=g)
    if ignore_every:
        labels.view(-1)[::ignore_every] = -100
    return ids, labels


def documents_for(shape: list[int], seed: int, padding: bool) -> dict[str, torch.Tensor]:
    """For a step with packed documents: padding (a mask, right padding of random lengths), or packed
    documents (position_ids restarting at 3 random cuts per row, so documents span the ranks' shards)."""
    b, s = shape
    g = torch.Generator().manual_seed(seed)
    if padding:
        mask = torch.ones(b, s, dtype=torch.long)
        for r in range(b):
            n = int(torch.randint(1, max(2, s // 2), (), generator=g))
            mask[r, s - n:] = 0
        return {"attention_mask": mask}
    pos = torch.arange(s).repeat(b, 1)
    for r in range(b):
        for cut in sorted((torch.randperm(s - 1, generator=g)[:3] + 1).tolist()):
            pos[r, cut:] -= pos[r, cut].item()
    return {"position_ids": pos}


def eager_loss(model, ids: torch.Tensor, labels: torch.Tensor, **documents: torch.Tensor) -> torch.Tensor:
    """The loss of the unmodified model, called as autosp's capture calls it (documents:
    attention_mask or position_ids, for Hugging Face models)."""
    out = model(input_ids=ids, labels=labels, use_cache=False, **documents) if hasattr(model, "can_generate") \
        else model(ids, labels)
    return getattr(out, "loss", out)


def _eager_step(model, batches, dp: int) -> list[torch.Tensor]:
    """Eager DDP semantics: each replica's mean loss, gradients averaged over the replicas."""
    model.zero_grad()
    losses = []
    for ids, labels, documents in batches:
        loss = eager_loss(model, ids, labels, **documents)
        (loss / dp).backward()
        losses.append(loss.detach())
    return losses


def run_rank(artifact: str, spec: str, seed: int = 0, steps: int = 1, lr: float = 0.0) -> Report:
    """On one rank of an initialized group: `steps` AdamW steps of the compiled module and of the
    eager model side by side. Each step compares the losses of the two trajectories, and the
    gradients with those eager computes at the compiled module's current parameters (Adam's
    normalized first steps turn rounding in near-zero gradients into parameter differences of
    order lr, so gradients are compared at equal points; the losses show the trajectories agree)."""
    import autosp
    m = autosp.load(artifact)
    ref = load_model(spec, seed=seed)        # the eager trajectory
    probe = load_model(spec, seed=seed)      # eager at the compiled module's parameters
    m.load_state_dict(ref.state_dict())
    dp_index, dp = m.mesh.index("dp"), m.mesh.dp
    vocab = vocab_size(ref)
    batches = [(*batch_for(vocab, m.input_shape, seed + 1000 * d, ignore_every=7), {}) for d in range(dp)]
    opt = torch.optim.AdamW(m.parameters(), lr=lr)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=lr)
    probe_params = dict(probe.named_parameters(remove_duplicate=False))
    worst: dict[str, float] = {}
    loss_err = 0.0
    for step in range(steps):
        if m.packed:   # packed documents and padding, one step each in turn
            batches = [(ids, labels, documents_for(m.input_shape, seed + step, padding=step % 2 == 1))
                       for ids, labels, _ in batches]
            if "attention_mask" in batches[0][2]:   # what a data collator gives: padding's labels ignored
                batches = [(ids, labels.masked_fill(docs["attention_mask"] == 0, -100), docs)
                           for ids, labels, docs in batches]
        eager = _eager_step(ref, batches, dp)[dp_index].item()
        probe.load_state_dict(m.state_dict())
        _eager_step(probe, batches, dp)
        m.zero_grad()
        ids, labels, documents = batches[dp_index]
        got = m(ids, labels, **documents)
        got.backward()
        loss_err = max(loss_err, abs(got.item() - eager) / max(abs(eager), 1e-12))
        pairs = [(name, p.grad, probe_params[name].grad) for name, p in m.named_parameters()
                 if not (p.grad is None and probe_params[name].grad is None)]
        largest = max(want.abs().max().item() for _, _, want in pairs)
        for name, grad, want in pairs:
            scale = want.abs().max().item()
            # a gradient below fp32's rounding of the largest one is zero to fp32 precision (e.g. a key
            # bias without RoPE: softmax does not see it): its rounding noise is measured against the largest
            scale = scale if scale >= FP32_EPS * largest else largest
            err = (grad - want).abs().max().item() / (scale or 1.0)
            worst[name] = max(worst.get(name, 0.0), err)
        opt.step()
        ref_opt.step()
    ranked = sorted(worst.items(), key=lambda t: -t[1])
    return Report(got.item(), eager, loss_err, ranked, steps)


def verify(artifact: str, spec: str, nproc: int, seed: int = 0, steps: int = 1, lr: float = 1e-3,
           timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Report]:
    from .launch import spawn, under_torchrun
    if under_torchrun():
        from .launch import init_from_env
        init_from_env(timeout_s=timeout_s)
        return [run_rank(artifact, spec, seed, steps, lr)]
    return spawn(nproc, run_rank, artifact, spec, seed, steps, lr, timeout_s=timeout_s)
