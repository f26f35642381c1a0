"""The AWD-style LSTM LM: shapes, state carrying, tying, projection, learned initial state, sites."""

import pytest
import torch

from embreg.errors import EmbregError
from embreg.models import LSTMLanguageModel
from embreg.nn import dropout_active, dropout_disabled


def _batch(index=None, reset=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    batch = {"input": torch.randint(0, 40, (3, 7), generator=g), "target": torch.randint(0, 40, (3, 7), generator=g)}
    if index is not None:
        batch.update(index=torch.tensor(index), reset=torch.tensor(reset))
    return batch


def _lm(**kwargs):
    torch.manual_seed(0)
    return LSTMLanguageModel.build(40, 8, 12, 2, **kwargs)


def test_shapes_loss_and_every_parameter_gets_a_gradient():
    lm = _lm(learn_init=True, q_input=0.3, q_weight=0.3)
    batch = _batch()
    out = lm(batch)
    assert out.predictions.shape == (3, 7, 40)
    assert out.hidden["input"].shape == (3, 7, 8) and out.hidden["hidden.0"].shape == (3, 7, 12)
    assert out.hidden["output"].shape == (3, 7, 8)  # tied: the last layer has emb_dim units
    lm.loss(batch, out).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in lm.parameters() if p.requires_grad)


def test_tied_weights_are_one_parameter_and_untied_or_projected_variants_build():
    lm = _lm()
    assert lm.decoder.weight is lm.embedding.weight
    assert _lm(tie=False).decoder.weight is not _lm(tie=False).embedding.weight
    projected = _lm(proj_dim=8)
    assert projected.rnns[-1].module.hidden_size == 12 and projected(_batch()).predictions.shape == (3, 7, 40)
    with pytest.raises(EmbregError, match="tie=True"):
        LSTMLanguageModel.build(40, 8, 12, 2, proj_dim=6)


def test_state_is_carried_between_batches_and_reset():
    lm = _lm().eval()
    first, second = _batch(0, reset=True, seed=1), _batch(1, seed=2)
    lm(first)
    carried = lm(second).predictions
    fresh = lm.forward_sequence(second["input"])[0].predictions
    assert not torch.allclose(carried, fresh)
    _, state = lm.forward_sequence(first["input"])
    assert torch.allclose(carried, lm.forward_sequence(second["input"], state)[0].predictions)
    assert torch.allclose(lm(_batch(2, reset=True, seed=2)).predictions, fresh)


def test_repeated_passes_over_one_batch_start_from_the_same_state():
    lm = _lm()  # no dropout: passes are deterministic
    lm(_batch(0, reset=True, seed=1))
    second = _batch(1, seed=2)
    a = lm(second).predictions
    b = lm(second).predictions  # e.g. Dropout_k's second draw or a regulariser's clean pass
    assert torch.equal(a, b)


def test_dropout_is_active_only_in_training_and_can_be_paused():
    lm = _lm(q_output=0.5)
    batch = _batch()
    assert dropout_active(lm)
    torch.manual_seed(0)
    assert not torch.equal(lm(batch).predictions, lm(batch).predictions)
    with dropout_disabled(lm):
        assert torch.equal(lm(batch).predictions, lm(batch).predictions)
    lm.eval()
    assert not dropout_active(lm)


def test_dropout_sites_have_the_model_sharing():
    lm = _lm()
    batch = _batch()
    sites = lm.dropout_sites(batch, lm(batch))
    assert {n: s.structure for n, s in sites.items()} == {
        "embedding": "token",
        "input": "locked",
        "hidden.0": "locked",
        "output": "locked",
        "weight_hh.0": "element",
        "weight_hh.1": "element",
    }
    assert sites["weight_hh.1"].tensor is lm.rnns[1].module.weight_hh_l0


def test_bad_construction_errors():
    with pytest.raises(EmbregError, match="at least one"):
        LSTMLanguageModel(torch.nn.Embedding(5, 4), [])
    with pytest.raises(EmbregError, match="batch-first"):
        LSTMLanguageModel(torch.nn.Embedding(5, 4), [torch.nn.LSTM(4, 4)])
    with pytest.raises(EmbregError, match=r"\[0, 1\)"):
        LSTMLanguageModel.build(5, 4, 4, 1, q_output=1.0)


def test_twice_differentiable_changes_nothing_on_the_cpu():
    batch = _batch()
    plain, twice = _lm(), _lm(twice_differentiable=True)
    assert torch.equal(plain(batch).predictions, twice(batch).predictions)


@pytest.mark.parametrize(("recipe", "twice"), [("lm-dropout-k-xi", True), ("lm-r-approx", True), ("lm-dropout", False)])
def test_recipes_with_a_regulariser_that_differentiates_the_backward_build_a_twice_differentiable_model(
    recipe: str, twice: bool
) -> None:
    from embreg.errors import DataError
    from embreg.recipes import load_recipe
    from embreg.recipes.run import build_run

    loaded = load_recipe(recipe)
    try:
        built = build_run(load_recipe(recipe, list(loaded.adapter.smoke_overrides)))
    except DataError as exc:  # the Wikipedia extract needs gensim (the [nlp] extra)
        pytest.skip(str(exc))
    assert built.model.twice_differentiable is twice
