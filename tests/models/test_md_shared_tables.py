"""Mixed-dimension tables on BPR, SASRec / SSE-PT and the LSTM LM: built through the recipe path, the output scores
read the same table's projected rows, parameter counts match the sizing plan, and a tiny run trains."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
import torch

from embreg.embeddings import MixedDimensionEmbedding, md_embedding_tables
from embreg.errors import ConfigError
from embreg.nn import TiedOutput
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run, parameter_counts, run_single

MD = "embeddings={name: md, alpha: 0.4, num_blocks: 3}"


def _plan(counts: list[np.ndarray], dim: int):
    """The plan the recipe's md entry makes for these training counts (alpha 0.4, 3 blocks, base dim ``dim``)."""
    return md_embedding_tables([torch.as_tensor(c) for c in counts], num_blocks=3, alpha=0.4, base_dim=dim)[1]


@pytest.fixture
def ratings_file(tmp_path) -> list[str]:
    g = np.random.default_rng(0)
    users, items = g.integers(0, 40, 3000), g.zipf(1.5, 3000) % 60
    lines = ["u,i,r"] + [f"{u},{i},{1 + (u + i) % 5}" for u, i in zip(users, items)]
    path = tmp_path / "r.csv"
    path.write_text("\n".join(lines) + "\n")
    # repeated pairs carry the same rating, so averaging them keeps every value
    return [f"data.path={path}", "data.user_col=u", "data.item_col=i", "data.rating_col=r", "data.duplicates=mean"]


@pytest.fixture
def timed_file(tmp_path) -> list[str]:
    g = np.random.default_rng(0)
    rows = [f"u{u},i{int(g.zipf(1.6)) % 40},{1000 + t}" for u in range(30) for t in range(int(g.integers(4, 12)))]
    path = tmp_path / "timed.csv"
    path.write_text("user,item,ts\n" + "\n".join(rows) + "\n")
    return [
        f"data.path={path}",
        "data.user_col=user",
        "data.item_col=item",
        "data.timestamp_col=ts",
        "data.max_len=8",
        "data.eval_negatives=5",
        "train.epochs=1",
        "train.progress=false",
        "model.dim=8",
        "model.heads=2",
    ]


@pytest.fixture
def text_files(tmp_path) -> list[str]:
    words = ("cat", "dog", "fox", "owl", "cat", "cat", "dog")
    text = "\n".join(f"the {w} sat on the mat and the {w} ran away" for w in words * 20)
    paths = []
    for name in ("train", "valid", "test"):
        path = tmp_path / f"{name}.txt"
        path.write_text(text)
        paths.append(str(path))
    return [
        f"data.paths={paths}",
        "data.max_train_tokens=null",
        "data.max_eval_tokens=null",
        "data.min_count=1",
        "model.emb_dim=8",
        "model.hidden_dim=8",
        "train.batch_size=4",
        "train.epochs=1",
        "data.bptt=10",
        "train.progress=false",
    ]


# ------------------------------------------------------------------------------------------------------------- BPR
def test_md_bpr_builds_md_tables_whose_parameter_count_matches_the_plan(ratings_file) -> None:
    built = build_run(load_recipe("bpr", [*ratings_file, MD, "model.dim=8"]))
    model, context = built.model, built.context
    assert isinstance(model.user_embedding, MixedDimensionEmbedding)
    assert isinstance(model.item_embedding, MixedDimensionEmbedding)
    plan = _plan([context.frequencies("user"), context.frequencies("item")], 8)
    assert (model.user_embedding.block_dims, model.item_embedding.block_dims) == plan.dims
    assert model.embedding_parameter_count() == plan.num_parameters < plan.uniform_num_parameters
    assert parameter_counts(model)["embedding_parameters"] == plan.num_parameters
    scores = model.score_all(torch.tensor([0, 1]))  # every item, through the projections
    assert torch.allclose(scores[0], model.item_embedding.materialize() @ model.user_embedding.materialize()[0])


def test_md_bpr_trains(ratings_file, tmp_path) -> None:
    recipe = load_recipe("bpr", [*ratings_file, MD, "model.dim=8", "train.epochs=1", "train.progress=false"])
    metrics = run_single(recipe, tmp_path / "run").metrics
    assert 0.0 <= metrics["test_ndcg@10"] <= 1.0 and metrics["embedding_parameters"] > 0


# ---------------------------------------------------------------------------------------------------------- SASRec
@pytest.mark.parametrize("user_dim", [0, 4], ids=["sasrec", "sse-pt"])
def test_md_sasrec_item_table_serves_inputs_and_scores(timed_file, user_dim) -> None:
    built = build_run(load_recipe("sasrec", [*timed_file, MD, f"model.user_dim={user_dim}"]))
    model, context = built.model, built.context
    table = model.item_embedding
    assert isinstance(table, MixedDimensionEmbedding) and table.num_embeddings == model.num_items  # no PAD row
    plan = _plan([context.frequencies("item")], 8)
    assert table.block_dims == plan.dims[0] and table.num_parameters == plan.num_parameters
    users = sum(p.numel() for p in model.user_embedding.parameters()) if user_dim else 0
    assert (
        parameter_counts(model)["embedding_parameters"]
        == plan.num_parameters + users + model.position_embedding.weight.numel()
    )
    # output scores: <F, E_i[j] P_i> for every item, the same table's projected rows
    pad = model.pad
    batch = {"user": torch.tensor([0, 1]), "input": torch.tensor([[pad, pad, 1, 2], [0, 3, 4, 5]])}
    model.eval()
    last = model.encode(batch["input"], batch["user"])[:, -1]
    expected = last[:, : model.dim] @ table.materialize().T
    if user_dim:
        expected = expected + (last[:, model.dim :] * model.user_embedding(batch["user"])).sum(-1, keepdim=True)
    assert torch.allclose(model.score_next(batch), expected, atol=1e-5)
    # a PAD entry looks nothing up: its vector is zero
    assert torch.count_nonzero(model.item_vectors(torch.tensor([pad]))) == 0


@pytest.mark.parametrize("loss", ["bce", "ce"])
def test_md_sasrec_loss_trains_every_block_and_projection(timed_file, loss) -> None:
    built = build_run(load_recipe("sasrec", [*timed_file, MD, f"model.loss={loss}", "model.dropout=0.0"]))
    model = built.model.train()
    pad = model.pad
    batch = {
        "input": torch.tensor([[pad, 1, 2, 3], [0, 4, 5, 1]]),
        "target": torch.tensor([[pad, 2, 3, 4], [4, 5, 1, 2]]),
        "neg": torch.tensor([[pad, 0, 5, 1], [3, 2, 0, 5]]),
    }
    model.loss(batch, model(batch)).backward()
    table = model.item_embedding
    assert table.flat_projections is not None and table.flat_projections.grad is not None
    assert table.flat_projections.grad.abs().sum() > 0


def test_md_sasrec_trains_and_a_mismatched_width_is_refused(timed_file, tmp_path) -> None:
    metrics = run_single(load_recipe("sasrec", [*timed_file, MD]), tmp_path / "run").metrics
    assert 0.0 <= metrics["test_ndcg@10"] <= 1.0
    recipe = load_recipe("sasrec", [*timed_file, "embeddings={name: md, budget: 150, max_dim: 7}"])
    with pytest.raises(ConfigError, match="model.heads=2"):
        build_run(recipe)


@pytest.mark.parametrize("model", ["sasrec", "lstm-lm"])
def test_sparse_tables_are_refused_where_the_output_reads_every_row(timed_file, text_files, model) -> None:
    sets = timed_file if model == "sasrec" else text_files
    name = model if model == "sasrec" else "lm-dropout"
    for kind in ("uniform", "md"):
        with pytest.raises(ConfigError, match="embeddings.sparse=true is not available"):
            build_run(load_recipe(name, [*sets, f"embeddings={{name: {kind}, sparse: true}}"]))


# ---------------------------------------------------------------------------------------------------------- LSTM LM
def test_md_lstm_lm_ties_the_softmax_to_the_projected_rows(text_files) -> None:
    built = build_run(load_recipe("lm-dropout", [*text_files, MD]))
    model, context = built.model, built.context
    table = model.embedding.embedding
    assert isinstance(table, MixedDimensionEmbedding) and isinstance(model.decoder, TiedOutput)
    plan = _plan([context.frequencies("token")], 8)
    assert table.block_dims == plan.dims[0]
    assert parameter_counts(model)["embedding_parameters"] == plan.num_parameters
    assert torch.allclose(model.decoder.weight, table.materialize())
    model.eval()
    batch = {"input": torch.tensor([[0, 1, 2, 3]]), "target": torch.tensor([[1, 2, 3, 4]])}
    out = model(batch)
    last = out.hidden["output"]
    assert torch.allclose(out.predictions, last @ table.materialize().T + model.decoder.bias, atol=1e-5)
    model.train()
    model.loss(batch, model(batch)).backward()
    assert table.flat_projections is not None and table.flat_projections.grad.abs().sum() > 0


def test_md_lstm_lm_trains_with_embedding_dropout(text_files, tmp_path) -> None:
    recipe = load_recipe("lm-dropout", [*text_files, MD, "model.dropout.embedding=0.2"])
    metrics = run_single(recipe, tmp_path / "run").metrics
    assert np.isfinite(metrics["test_ppl"])


@pytest.mark.parametrize(
    "name",
    [
        "embreg.models.single_table",
        "embreg.nn.tied_output",
        "embreg.nn.embedding_dropout",
        "embreg.regularizers.divergence",
        "embreg.models.sasrec",
    ],
)
def test_docstring_examples_run(name) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result


def test_full_weight_is_every_projected_row_and_differentiable() -> None:
    counts = torch.tensor([9.0, 1, 5, 1, 2, 1, 7, 3])
    (table,), _ = md_embedding_tables([counts], num_blocks=3, alpha=0.6, base_dim=6)
    full = table.full_weight()
    assert torch.allclose(full, table(torch.arange(8)))
    full.pow(2).sum().backward()
    assert table.flat_rows.grad is not None and table.flat_projections.grad is not None
    assert table.flat_projections.grad.abs().sum() > 0


def test_md_sasrec_with_sse_draws_the_same_on_the_host(timed_file, tmp_path) -> None:
    sets = [*timed_file, MD, "index_transforms={item: {name: sse-se, p: 0.3}, label: {name: sse-se, p: 0.3}}"]
    device = run_single(load_recipe("sasrec", [*sets, "train.index_transforms_on=device"]), None).metrics
    host = run_single(load_recipe("sasrec", [*sets, "train.index_transforms_on=host"]), None).metrics
    assert device["test_ndcg@10"] == host["test_ndcg@10"] and device["val_mrr"] == host["val_mrr"]
