"""Every method that takes several items takes a list: a single str is refused with the fix, never taken character
by character (embreg.data.files.inputs.item_list), on a loaded run and on an ensemble's run alike."""

from __future__ import annotations

import pytest

from embreg.errors import ConfigError, DataError
from embreg.serving import load, load_ensemble

REFUSED = r"takes a list, not a single str: pass \["


def test_translate_takes_a_list_of_lines(trained) -> None:
    run = load(trained("translation"))
    with pytest.raises(ConfigError, match=r"translate\(lines=...\) " + REFUSED + "'w1 w2'\\]"):
        run.translate("w1 w2")
    one = run.translate(["w1 w2"])
    assert len(one) == 1 and one == run.translate(["w1 w2", "w3"])[:1]


def test_score_takes_a_list_of_lines(trained) -> None:
    run = load(trained("lm"))
    with pytest.raises(ConfigError, match=r"score\(texts=...\) " + REFUSED + "'the cat sat'\\]"):
        run.score("the cat sat")
    assert list(run.score(["the cat sat"])["line"]) == ["1", "total"]


def test_predict_takes_a_list_of_texts_and_a_str_is_a_file(trained) -> None:
    run = load(trained("classification"))
    assert len(run.predict(["good film", "bad film"]).table) == 2
    assert len(run.predict(("good film",)).table) == 1
    with pytest.raises(DataError, match=r"does not exist \(to predict on a text itself, pass a list: predict\(\['good"):
        run.predict("good film")


def test_recommend_takes_lists_of_users_and_history(trained) -> None:
    run = load(trained("ranking"))
    user = run.vocabularies["user"].labels_of([0])[0]
    with pytest.raises(ConfigError, match=r"recommend\(users=...\) takes a list, not a single"):
        run.recommend(str(user), k=3)
    with pytest.raises(ConfigError, match=r"recommend\(users=...\) takes a list, not a single int: pass \["):
        run.recommend(int(user), k=3)
    assert set(run.recommend([user], k=3)["user"]) == {user}
    sequential = load(trained("next-item"))
    item = sequential.vocabularies["item"].labels_of([1])[0]
    with pytest.raises(ConfigError, match=r"recommend\(history=...\) takes a list, not a single"):
        sequential.recommend(history=str(item), k=3)
    assert len(sequential.recommend(history=[item], k=3)) == 3


def test_an_ensembles_run_follows_the_same_rule(trained) -> None:
    ensemble = load_ensemble([trained("lm"), trained("lm")])
    with pytest.raises(ConfigError, match=r"score\(texts=...\) " + REFUSED):
        ensemble.run.score("the cat sat")
    together, alone = ensemble.run.score(["the cat sat"]), load(trained("lm")).score(["the cat sat"])
    assert together["perplexity"].tolist() == pytest.approx(alone["perplexity"].tolist(), rel=1e-4)
    ranking = load_ensemble([trained("ranking"), trained("ranking")])
    with pytest.raises(ConfigError, match=r"recommend\(users=...\) " + REFUSED):
        ranking.run.recommend("1", k=3)
