"""Compare the compiled program on N ranks with the eager model on one process."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autosp.frontend.sources import load_model, vocab_size


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


def run_rank(artifact: str, spec: str, seed: int = 0, steps: int = 1, lr: float = 0.0) -> Report:
    """On one rank of an initialized group: compiled step vs eager, after `steps` AdamW steps."""
    import autosp
    m = autosp.load(artifact)
    ref = load_model(spec, seed=seed)
    m.load_state_dict(ref.state_dict())
    dp_index, dp = m.mesh.index("dp"), m.mesh.dp
    vocab = vocab_size(ref)
    batches = [batch_for(vocab, m.input_shape, seed + 1000 * d, ignore_every=7) for d in range(dp)]
    opt = torch.optim.AdamW(m.parameters(), lr=lr)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=lr)
    ref_params = dict(ref.named_parameters(remove_duplicate=False))
    worst: dict[str, float] = {}
    loss_err = 0.0
    for step in range(steps):
        # eager DDP semantics: each replica's mean loss, gradients averaged over replicas
        ref.zero_grad()
        losses = []
        for ids, labels in batches:
            out = ref(input_ids=ids, labels=labels, use_cache=False) if hasattr(ref, "can_generate") \
                else ref(ids, labels)
            loss = getattr(out, "loss", out)
            (loss / dp).backward()
            losses.append(loss.detach())
        m.zero_grad()
        ids, labels = batches[dp_index]
        got = m(ids, labels)
        got.backward()
        eager = losses[dp_index].item()
        loss_err = max(loss_err, abs(got.item() - eager) / max(abs(eager), 1e-12))
        for name, p in m.named_parameters():
            want = ref_params[name].grad
            if want is None and p.grad is None:
                continue
            err = (p.grad - want).abs().max().item() / (want.abs().max().item() or 1.0)
            worst[name] = max(worst.get(name, 0.0), err)
        if step + 1 < steps:  # both optimizers step: the next step compares the two trajectories
            opt.step()
            ref_opt.step()
    ranked = sorted(worst.items(), key=lambda t: -t[1])
    return Report(got.item(), eager, loss_err, ranked, steps)


def verify(artifact: str, spec: str, nproc: int, seed: int = 0, steps: int = 1, lr: float = 1e-3) -> list[Report]:
    from .launch import spawn, under_torchrun
    if under_torchrun():
        from .launch import init_from_env
        init_from_env()
        return [run_rank(artifact, spec, seed, steps, lr)]
    return spawn(nproc, run_rank, artifact, spec, seed, steps, lr)
