"""The Transformer translator: padding never receives attention, special ids are never swapped or drawn, index
transforms act in training only and once per step, label smoothing is the plain loss at 0."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import ConfigError
from embreg.models.transformer_nmt import NUM_SPECIAL, SPECIAL_IDS, TransformerTranslator, transform_regular_ids
from embreg.sse import SSE


def _model(**kwargs) -> TransformerTranslator:
    torch.manual_seed(0)
    options = dict(d_model=16, heads=2, encoder_layers=2, decoder_layers=2, feedforward=32, dropout=0.0)
    return TransformerTranslator(14, 14, **(options | kwargs)).eval()


def test_padding_positions_get_no_attention_and_change_nothing() -> None:
    model = _model()
    source = torch.tensor([[5, 6, 7, 2]])
    padded = torch.tensor([[5, 6, 7, 2, 0, 0, 0]])
    prefix = torch.tensor([[1, 8, 9]])
    memory, mask = model.encode(source)
    memory_p, mask_p = model.encode(padded)
    torch.testing.assert_close(memory_p[:, :4], memory, rtol=0, atol=1e-6)
    log_probs, attention = model.decode_step(prefix, memory, mask)
    log_probs_p, attention_p = model.decode_step(prefix, memory_p, mask_p)
    assert (attention_p[:, 4:] == 0).all()
    torch.testing.assert_close(attention_p[:, :4], attention, rtol=0, atol=1e-6)
    torch.testing.assert_close(log_probs_p, log_probs, rtol=0, atol=1e-6)
    # whatever embedding the padding id has, a padded batch scores the same (target padding too)
    batch = {"source": torch.tensor([[5, 6, 2, 0], [7, 8, 9, 2]]), "target": torch.tensor([[1, 5, 2, 0], [1, 6, 7, 2]])}
    loss = model.loss(batch, model(batch))
    with torch.no_grad():
        model.source_embedding.weight[0].normal_()
    torch.testing.assert_close(model.loss(batch, model(batch)), loss, rtol=0, atol=1e-6)
    wider = {k: F.pad(v, (0, 3)) for k, v in batch.items()}
    torch.testing.assert_close(model.loss(wider, model(wider)), loss, rtol=0, atol=1e-6)


def test_special_ids_are_never_swapped_nor_drawn() -> None:
    torch.manual_seed(0)
    ids = torch.randint(0, 20, (64, 30))
    drawn = transform_regular_ids(ids, SSE(20 - NUM_SPECIAL, p=1.0, seed=1))
    special = ids < NUM_SPECIAL
    assert special.any() and torch.equal(drawn[special], ids[special])
    assert (drawn[~special] >= NUM_SPECIAL).all() and (drawn[~special] != ids[~special]).all()
    assert drawn.max() < 20


def test_index_transforms_act_in_training_once_per_step_and_keep_the_labels() -> None:
    model = _model(source_transform=SSE(10, p=0.5, seed=0), target_transform=SSE(10, p=0.5, seed=1)).train()
    batch = {"source": torch.tensor([[5, 6, 7, 2, 0]] * 8), "target": torch.tensor([[1, 8, 9, 10, 2]] * 8)}
    drawn = model.draw_index_transforms(batch)
    assert not torch.equal(drawn["source"], batch["source"]) and not torch.equal(drawn["target"], batch["target"])
    assert torch.equal(drawn["labels"], batch["target"])
    out = model(batch)  # the same step: the same swaps
    assert torch.equal(out.hidden["source_ids"], drawn["source"][:, :4])
    model.eval()
    assert torch.equal(model(batch).hidden["source_ids"], batch["source"][:, :4])


def test_label_smoothing_zero_is_the_plain_cross_entropy() -> None:
    model = _model(label_smoothing=0.0)
    batch = {"source": torch.tensor([[5, 6, 2]]), "target": torch.tensor([[1, 7, 8, 2]])}
    out = model(batch)
    plain = F.cross_entropy(out.predictions[0], batch["target"][0, 1:])
    torch.testing.assert_close(model.loss(batch, out), plain)
    smoothed = _model(label_smoothing=0.1)
    assert not torch.allclose(smoothed.loss(batch, smoothed(batch)), plain)


def test_shared_embeddings_tie_source_target_and_output() -> None:
    model = _model(share_embeddings=True)
    assert model.source_embedding is model.target_embedding
    assert model.output.weight is model.target_embedding.weight
    with pytest.raises(ConfigError, match="share_embeddings=true needs one joint vocabulary"):
        TransformerTranslator(14, 15, d_model=16, heads=2, share_embeddings=True)
    assert SPECIAL_IDS == {"pad": 0, "bos": 1, "eos": 2, "unk": 3}


def test_every_dropout_draws_packed_masks_and_the_state_dict_is_torchs() -> None:
    from embreg.nn.packed_dropout import PackedDropout

    model = TransformerTranslator(20, 20, d_model=16, heads=2, encoder_layers=2, decoder_layers=2, feedforward=32)
    dropouts = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    assert dropouts and all(type(m) is PackedDropout and m.p == 0.1 for m in dropouts)
    layer = nn.TransformerEncoderLayer(16, 2, 32, 0.1, batch_first=True)
    assert {k for k in model.encoder.layers[0].state_dict()} == set(layer.state_dict())
