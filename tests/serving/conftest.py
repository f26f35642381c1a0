"""Tiny finished runs of every family, trained once per test session, for the serving tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from embreg.recipes import load_recipe
from embreg.recipes.run import run_single

QUICK = ["train.epochs=1", "train.progress=false", "train.device=cpu"]


def _ratings_file(path: Path) -> Path:
    """240 ratings over string user ids (``u00``..``u19``, plus ``007``) and item ids (``i00``..``i29``), each
    (user, item) pair once."""
    rng = np.random.default_rng(0)
    user_numbers = np.concatenate([np.full(12, -1), rng.integers(0, 20, 228)])  # -1: the user "007"
    item_numbers = rng.integers(0, 30, 240)
    for row in range(240):  # move a repeated pair to the user's next free item
        taken = {(u, i) for u, i in zip(user_numbers[:row], item_numbers[:row])}
        while (user_numbers[row], item_numbers[row]) in taken:
            item_numbers[row] = (item_numbers[row] + 1) % 30
    users = ["007" if u < 0 else f"u{u:02d}" for u in user_numbers]
    items = [f"i{i:02d}" for i in item_numbers]
    stamps = np.arange(240)
    lines = ["user,item,rating,time"] + [
        f"{u},{i},{r},{t}" for u, i, r, t in zip(users, items, rng.integers(1, 6, 240), stamps)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _clicks_file(path: Path) -> Path:
    rng = np.random.default_rng(1)
    rows = ["site,device,price,label"]
    for _ in range(300):
        site, device = rng.integers(0, 6), rng.integers(0, 3)
        rows.append(f"s{site},d{device},{rng.normal():.3f},{int(rng.random() < 0.2 + 0.1 * site)}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _text_files(directory: Path) -> list[str]:
    rng = np.random.default_rng(2)
    words = "the cat dog sat ran on a mat and big small house".split()
    paths = []
    for name, lines in (("train", 300), ("valid", 40), ("test", 40)):
        text = "\n".join(" ".join(rng.choice(words, rng.integers(3, 9))) for _ in range(lines))
        (directory / f"{name}.txt").write_text(text + "\n")
        paths.append(str(directory / f"{name}.txt"))
    return paths


@pytest.fixture(scope="session")
def serving_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serving")


@pytest.fixture(scope="session")
def trained(serving_dir: Path) -> Callable[[str], Path]:
    """``trained(family)``: the directory of a finished tiny run of that family (trained on first use)."""
    done: dict[str, Path] = {}

    def overrides(family: str) -> tuple[str, list[str]]:
        data = serving_dir / "data"
        data.mkdir(exist_ok=True)
        if family == "rating":
            return "mf", [
                f"data.path={_ratings_file(data / 'ratings.csv')}",
                "data.user_col=user",
                "data.item_col=item",
                "train.batch_size=64",
            ]
        if family == "rating-ml100k":
            return "mf", ["data.max_rows=2000"]
        if family == "ranking":
            return "bpr", ["data.max_rows=3000"]
        if family == "next-item":
            return "sasrec", ["data.max_rows=3000", "data.max_len=20", "data.eval_negatives=20", "train.batch_size=32"]
        if family == "next-item-file":
            return "sasrec", [
                f"data.path={_ratings_file(data / 'timed.csv')}",
                "data.user_col=user",
                "data.item_col=item",
                "data.timestamp_col=time",
                "data.max_len=10",
                "data.eval_negatives=5",
                "train.batch_size=8",
            ]
        if family == "ctr":
            return "ctr-adult", [
                f"data.path={_clicks_file(data / 'clicks.csv')}",
                "data.dense_cols=[price]",
                "train.batch_size=64",
            ]
        if family == "lm":
            return "lm-none", [
                f"data.paths=[{','.join(_text_files(data))}]",
                "data.max_vocab=50",
                "train.batch_size=4",
                "train.eval_batch_size=4",
                "data.bptt=10",
            ]
        if family == "classification":
            from tests.helpers.finetune_tiny import tiny_checkpoint

            checkpoint = tiny_checkpoint(data / "bert")
            return "ft-polarity", [
                f"model.pretrained={checkpoint}",
                "model.pooling=cls",
                "train.keep_checkpoints=best",
                "train.batch_size=32",
            ]
        if family == "regression":
            from tests.helpers.finetune_tiny import tiny_checkpoint

            checkpoint = tiny_checkpoint(data / "bert-mean")
            rng = np.random.default_rng(3)
            words = ["good", "bad", "dress", "film", "the", "a", "is", "not"]
            rows = ["text,label"] + [f"{' '.join(rng.choice(words, 5))},{rng.normal():.3f}" for _ in range(80)]
            (data / "scores.csv").write_text("\n".join(rows) + "\n")
            return "ft-polarity", [
                "task=regression",
                "data.task=regression",
                f"data.path={data / 'scores.csv'}",
                "data.valid_size=16",
                "data.test_size=16",
                "data.train_size=null",
                f"model.pretrained={checkpoint}",
                "train.keep_checkpoints=best",
                "train.batch_size=16",
            ]
        if family == "classification-mean":  # the fine-tuning recipes' default pooling
            from tests.helpers.finetune_tiny import tiny_checkpoint

            checkpoint = tiny_checkpoint(data / "bert-classes")
            return "ft-polarity", [
                f"model.pretrained={checkpoint}",
                "train.keep_checkpoints=best",
                "train.batch_size=32",
            ]
        if family == "mlm":
            from tests.helpers.finetune_tiny import tiny_checkpoint

            checkpoint = tiny_checkpoint(data / "bert-mask", mask=True)
            return "mlm", [
                f"model.pretrained={checkpoint}",
                "data.max_texts=32",
                "data.valid_size=16",
                "data.test_size=16",
                "data.max_length=24",
                "train.batch_size=16",
            ]
        if family == "translation":
            from tests.helpers.translation import quick_overrides, write_pairs

            return "translation", quick_overrides(write_pairs(data / "pairs.tsv"), epochs=1)
        if family == "tagging":
            from tests.helpers.tagging_files import write_conll_splits

            (data / "conll").mkdir(exist_ok=True)  # train.txt, ... of its own: the lm family's are in data/
            paths = write_conll_splits(data / "conll")
            return "tagging-bilstm-crf", [
                f"data.path={paths['train']}",
                f"data.valid_path={paths['valid']}",
                f"data.test_path={paths['test']}",
                "model.emb_dim=16",
                "model.hidden_dim=8",
                "train.batch_size=8",
            ]
        raise KeyError(family)

    def get(family: str) -> Path:
        if family not in done:
            name, extra = overrides(family)
            out = serving_dir / family
            run_single(load_recipe(name, [*extra, *QUICK]), out)
            done[family] = out
        return done[family]

    return get
