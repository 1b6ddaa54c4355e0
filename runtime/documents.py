"""Packed documents and padding, as a compiled step with packed documents takes them.

The Hugging Face convention: several documents packed in one row carry position_ids that restart per
document, and a new document starts wherever position_ids does not step by one
(transformers' find_packed_sequence_indices); flash-attention's cu_seqlens (cumulative document
lengths over the flattened [batch x seq] tokens) say the same. Attention reads each token's position
in its document (`doc_pos`): a query attends to the keys of its own document up to itself.

An attention_mask (1: token, 0: padding) must pad on the right, as training batches do: a row's pad
tokens become one document after its tokens and their labels count as -100 (ignored), so the loss
and the gradients are those of the tokens, exactly (no token reads a pad, and a pad's gradient is
0). One document, not one per pad: each is a sequence of FlashAttention's variable-length batch,
whose backward holds 128 rows of fp32 per sequence. Left padding is refused: there the first
token's label is predicted at a pad position, whose attention sees no token (eager Hugging Face
attends it to every position instead), so no exact meaning exists for it."""
from __future__ import annotations

import torch

IGNORE_INDEX = -100   # cross_entropy's default ignore_index, which the captured losses use


def positions_from_cu_seqlens(cu_seqlens: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
    """[batch, seq] position_ids restarting at each document start of cu_seqlens."""
    cu = [int(c) for c in cu_seqlens.reshape(-1).tolist()]
    total = batch * seq
    if not cu or cu[0] != 0 or cu[-1] != total or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens must rise from 0 to batch x seq = {total} tokens, got {cu}")
    row_starts = set(range(0, total, seq))
    if not row_starts <= set(cu):
        raise ValueError(f"cu_seqlens {cu}: a document crosses a row boundary (every multiple of seq={seq} must "
                         "start a document)")
    starts = torch.tensor(cu[:-1], dtype=torch.long, device=cu_seqlens.device)
    flat = torch.arange(total, device=cu_seqlens.device)
    doc = torch.searchsorted(starts, flat, right=True) - 1
    return (flat - starts[doc]).view(batch, seq)


def doc_positions(position_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Each token's position in its document, [batch, seq] int64; a row's pads (right padding) are
    one document, whatever their position_ids."""
    idx = torch.arange(position_ids.shape[1], device=position_ids.device).expand_as(position_ids)
    start = torch.ones_like(position_ids, dtype=torch.bool)
    start[:, 1:] = position_ids[:, 1:] != position_ids[:, :-1] + 1
    if attention_mask is not None:
        pad = attention_mask == 0
        first_pad = pad.clone()
        first_pad[:, 1:] &= ~pad[:, :-1]
        start = torch.where(pad, first_pad, start)
    first = torch.where(start, idx, torch.zeros_like(idx)).cummax(dim=1).values
    return idx - first


def check_mask(attention_mask: torch.Tensor) -> None:
    """Refuse a mask that is not right padding (a sync: one value to the host)."""
    m = (attention_mask != 0).to(torch.int8)
    after_pad = (m[:, 1:] > m[:, :-1]).any(1)   # a token after a pad
    if bool(after_pad.any()):
        row = int(after_pad.nonzero()[0, 0])
        first = int((m[row] == 0).nonzero()[0, 0])
        raise ValueError(f"attention_mask row {row} has a token after the pad at position {first}: autosp takes "
                         "right padding (tokens first, then pads); give separate documents as position_ids")


def step_inputs(input_ids: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None,
                position_ids: torch.Tensor | None, cu_seqlens: torch.Tensor | None) -> list[torch.Tensor]:
    """The inputs of a step with packed documents: input_ids, labels (pads ignored), position_ids, doc_pos."""
    b, s = input_ids.shape
    if position_ids is not None and cu_seqlens is not None:
        raise ValueError("give position_ids or cu_seqlens, not both")
    if cu_seqlens is not None:
        position_ids = positions_from_cu_seqlens(cu_seqlens.to(input_ids.device), b, s)
    elif position_ids is None:
        position_ids = torch.arange(s, device=input_ids.device).expand(b, s)
    elif position_ids.dim() not in (1, 2) or position_ids.shape[-1] != s or position_ids.numel() not in (s, b * s):
        raise ValueError(f"position_ids is {list(position_ids.shape)}, the step takes [{b}, {s}] (or [1, {s}])")
    else:
        position_ids = position_ids.to(input_ids.device).expand(b, s)
    if attention_mask is not None:
        attention_mask = attention_mask.to(input_ids.device)
        if list(attention_mask.shape) != [b, s]:
            raise ValueError(f"attention_mask is {list(attention_mask.shape)}, the step takes [{b}, {s}]")
        check_mask(attention_mask)
        labels = labels.masked_fill(attention_mask == 0, IGNORE_INDEX)
    return [input_ids, labels, position_ids.long().contiguous(), doc_positions(position_ids.long(), attention_mask)]
