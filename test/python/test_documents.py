"""Packed documents and padding as the compiled step takes them (runtime/documents.py): the
document positions follow transformers' packed-sequence rule, cu_seqlens and masks are checked, and
the module and the compiler refuse what they cannot do exactly, in one line."""
from __future__ import annotations

import pytest
import torch

import autosp
from autosp.frontend import CompileError, load_model
from autosp.runtime.documents import check_mask, doc_positions, positions_from_cu_seqlens, step_inputs
from conftest import spec_for


def test_doc_positions_follow_transformers():
    """Same document for us iff for transformers (find_packed_sequence_indices): documents restarting
    at 0, one starting elsewhere (5), a row whose first document starts mid-way (3)."""
    from transformers.masking_utils import find_packed_sequence_indices
    pos = torch.tensor([[0, 1, 2, 0, 1, 5, 6, 7, 0, 1],
                        [3, 4, 5, 6, 0, 1, 2, 3, 4, 0]])
    hf = find_packed_sequence_indices(pos)
    start = torch.arange(10) - doc_positions(pos, None)
    assert torch.equal(start[:, :, None] == start[:, None, :], hf[:, :, None] == hf[:, None, :])
    assert doc_positions(pos, None).tolist()[0] == [0, 1, 2, 0, 1, 0, 1, 2, 0, 1]


def test_padding_is_one_document():
    """A row's pads are one document after its tokens, also where position_ids repeat over them (as
    Hugging Face's collators fill them), and their labels are ignored."""
    ids = torch.zeros(2, 6, dtype=torch.long)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]])
    given = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 1, 1, 1, 1, 1]])
    _, labels, pos, doc_pos = step_inputs(ids, torch.ones(2, 6, dtype=torch.long), mask, given, None)
    assert labels.tolist() == [[1, 1, 1, 1, -100, -100], [1, 1, -100, -100, -100, -100]]
    assert pos.tolist() == given.tolist() and doc_pos.tolist() == [[0, 1, 2, 3, 0, 1], [0, 1, 0, 1, 2, 3]]


def test_cu_seqlens():
    pos = positions_from_cu_seqlens(torch.tensor([0, 3, 8, 10, 16]), 2, 8)
    assert pos.tolist() == [[0, 1, 2, 0, 1, 2, 3, 4], [0, 1, 0, 1, 2, 3, 4, 5]]
    with pytest.raises(ValueError, match=r"cu_seqlens \[0, 5, 12, 16\]: a document crosses a row boundary"):
        positions_from_cu_seqlens(torch.tensor([0, 5, 12, 16]), 2, 8)
    with pytest.raises(ValueError, match=r"cu_seqlens must rise from 0 to batch x seq = 16 tokens, got \[0, 8, 12\]"):
        positions_from_cu_seqlens(torch.tensor([0, 8, 12]), 2, 8)


def test_left_padding_refused():
    check_mask(torch.tensor([[1, 1, 0], [1, 1, 1]]))
    with pytest.raises(ValueError, match="attention_mask row 1 has a token after the pad at position 0: autosp "
                                         "takes right padding"):
        check_mask(torch.tensor([[1, 1, 1], [0, 1, 1]]))


def test_packed_needs_hugging_face():
    model = load_model("builtin:tiny-llama", empty=True)
    ids = torch.zeros(1, 16, dtype=torch.long)
    with pytest.raises(CompileError, match="packed documents and attention masks need a Hugging Face causal LM"):
        autosp.compile(model, (ids, ids), packed=True)


def test_module_refuses_documents_it_was_not_compiled_for(hf_dir, compile_to, tmp_path):
    """An artifact without packed documents refuses a mask by name; one with them takes position_ids
    or cu_seqlens (not both) of the step's shape, and no CUDA graphs."""
    import torch.distributed as dist
    spec = spec_for("llama", hf_dir)
    plain, packed = compile_to(spec, 1, batch=1), compile_to(spec, 1, batch=1, packed=True)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ids = torch.zeros(1, 16, dtype=torch.long)
        m = autosp.load(plain)
        with pytest.raises(ValueError, match="attention_mask: this step was compiled without packed documents; "
                                             r"compile with packed=True"):
            m(ids, ids, attention_mask=torch.ones(1, 16))
        with pytest.raises(ValueError, match=r"^cuda_graphs=True: this step takes packed documents, .* load it with "
                                             r"cuda_graphs=False$"):
            autosp.load(packed, cuda_graphs=True)
        m = autosp.load(packed)
        m.load_state_dict(load_model(spec).state_dict())
        assert torch.isfinite(m(ids, ids, cu_seqlens=torch.tensor([0, 5, 16])))
        with pytest.raises(ValueError, match="give position_ids or cu_seqlens, not both"):
            m(ids, ids, position_ids=torch.arange(16), cu_seqlens=torch.tensor([0, 16]))
        with pytest.raises(ValueError, match=r"position_ids is \[15\], the step takes \[1, 16\]"):
            m(ids, ids, position_ids=torch.arange(15))
    finally:
        dist.destroy_process_group()
