"""SSE on the input word pieces of the encoder classifier: special tokens and padding keep their ids."""

import pytest
import torch

from embreg.sse import SSE

transformers = pytest.importorskip("transformers")


def _model(transform):
    from embreg.models import EncoderClassifier

    config = transformers.BertConfig(
        vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    torch.manual_seed(0)
    return EncoderClassifier(transformers.BertModel(config), num_labels=2, token_transform=transform)


def test_swaps_word_pieces_only_in_training():
    model = _model(SSE(40, p=1.0, seed=0))
    ids = torch.tensor([[2, 10, 11, 12, 3, 0], [2, 20, 3, 0, 0, 0]])
    mask = (ids != 0).long()
    swapped = model.train().swap_tokens(ids, mask)
    keep = torch.tensor([[1, 0, 0, 0, 1, 1], [1, 0, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(swapped[keep], ids[keep])  # [CLS], [SEP] and padding untouched
    assert (swapped[~keep] != ids[~keep]).all()  # p = 1: every word piece replaced by another id
    assert torch.equal(model.eval().swap_tokens(ids, mask), ids)


def test_no_transform_and_p_zero_leave_the_forward_unchanged():
    batch = {"input_ids": torch.tensor([[2, 10, 11, 3]]), "attention_mask": torch.ones(1, 4, dtype=torch.long)}
    plain, zero = _model(None).train(), _model(SSE(40, p=0.0, seed=0)).train()
    torch.manual_seed(1)
    a = plain(batch).predictions
    torch.manual_seed(1)
    b = zero(batch).predictions
    assert torch.equal(a, b)
