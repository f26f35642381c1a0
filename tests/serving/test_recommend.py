"""recommend: the evaluation's top-k on original ids, the user's own items excluded, batched."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embreg.errors import ConfigError, DataError
from embreg.metrics.recommendation import topk_excluding
from embreg.serving import load
from embreg.serving.recommending import seen_items


def test_ranking_top_k_is_the_full_ranking_with_every_own_item_excluded(trained) -> None:
    run = load(trained("ranking"))
    table = run.recommend(None, k=5, batch_size=100)
    ratings = run.prepared.ratings
    users = np.flatnonzero(np.bincount(ratings.users, minlength=ratings.num_users))
    assert table["user"].nunique() == len(users) and (table.groupby("user")["rank"].max() == 5).all()
    scores = run.model.score_all(torch.from_numpy(users)).detach()
    seen = seen_items(run)
    rows = torch.repeat_interleave(torch.arange(len(users)), torch.tensor([len(seen[u]) for u in users]))
    items = torch.from_numpy(np.concatenate([seen[u] for u in users]))
    expected = topk_excluding(scores, rows, items, 5)
    got = run.vocabularies["item"].indices(table["item"].to_numpy()).reshape(len(users), 5)
    np.testing.assert_array_equal(got, expected.numpy())
    for user, group in table.groupby("user"):  # never an item the user already has
        index = run.vocabularies["user"].indices([user])[0]
        assert not set(run.vocabularies["item"].indices(group["item"].to_numpy())) & set(seen[index].tolist())
    assert table.groupby("user")["score"].apply(lambda s: s.is_monotonic_decreasing).all()


def test_include_seen_ranks_every_item(trained) -> None:
    run = load(trained("ranking"))
    user = run.vocabularies["user"].labels[int(run.prepared.ratings.users[0])]
    mine = run.recommend([user], k=20, include_seen=True)
    scores = run.model.score_all(torch.tensor([run.vocabularies["user"].indices([user])[0]])).detach()
    best = torch.sort(scores[0], descending=True, stable=True).indices[:20].numpy()
    np.testing.assert_array_equal(run.vocabularies["item"].indices(mine["item"].to_numpy()), best)


def test_next_item_on_string_ids_excludes_the_history(trained) -> None:
    run = load(trained("next-item-file"))
    table = run.recommend(["007", "u03"], k=4)
    assert sorted(table["user"].unique()) == ["007", "u03"]
    assert all(item.startswith("i") for item in table["item"])
    seen = seen_items(run)
    for user, group in table.groupby("user"):
        index = run.vocabularies["user"].indices([user])[0]
        assert not set(run.vocabularies["item"].indices(group["item"].to_numpy())) & set(seen[index].tolist())


def test_next_item_ranking_places_the_target_where_the_evaluator_does(trained) -> None:
    """Recommending after the test history ranks each user's test target at the evaluator's full-ranking rank."""
    run = load(trained("next-item"))
    ranks = run.evaluator.ranks(run.model, "test")["full"]
    split = run.prepared.split
    items = run.vocabularies["item"]
    for row in range(5):
        history = items.labels_of(split.history("test")[row])
        user = run.vocabularies["user"].labels_of([split.users[row]])
        top = run.recommend(list(user), k=len(items), history=list(history))
        target = items.labels_of([split.test_items[row]])[0]
        assert top["item"].tolist().index(target) == int(ranks[row])


def test_unknown_users_and_bad_requests_are_clear_errors(trained) -> None:
    run = load(trained("ranking"))
    with pytest.raises(DataError, match="never seen in training"):
        run.recommend(["no-such-user"])
    with pytest.raises(ConfigError, match=r"k=0 must be an integer in \[1, "):
        run.recommend(None, k=0)
    with pytest.raises(ConfigError, match="next-item runs only"):
        run.recommend(None, history=["1"])
    with pytest.raises(ConfigError, match="recommend serves"):
        load(trained("rating")).recommend(None)


def test_serving_a_run_whose_sizes_were_fitted_prints_no_training_notes(tmp_path, capfd) -> None:
    """Training said once that the negatives were fitted to the small file (report.md keeps it); serving, which
    prepares the data again, says nothing of it."""
    from embreg.cli import main
    from tests.helpers.recipes import set_args
    from tests.helpers.small_files import small_file_overrides

    files = small_file_overrides("next-item", tmp_path)
    quick = ["train.epochs=1", "train.progress=false", "train.threads=1"]
    assert main(["run", "sasrec", *set_args([*files, *quick]), "--out", str(tmp_path / "run")]) == 0
    assert "embreg: note: " in capfd.readouterr().err and "fitted" in (tmp_path / "run" / "report.md").read_text()
    assert main(["recommend", str(tmp_path / "run"), "--users", "1", "--out", str(tmp_path / "top.csv")]) == 0
    out, err = capfd.readouterr()
    assert err == "" and out.startswith("1 users, top-10 items")
