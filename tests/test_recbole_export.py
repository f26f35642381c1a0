"""The RecBole peer's exporter writes exactly embreg's leave-one-out split (benchmarks/recbole_peer/export.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from embreg.data import RatingsData, leave_one_out
from tests.helpers.scripts import load_script

EXPORT = Path(__file__).resolve().parents[1] / "benchmarks" / "recbole_peer" / "export.py"


def _exporter():
    return load_script(EXPORT, "recbole_peer_export")


def test_the_export_reads_back_as_the_split(tmp_path):
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(20), rng.integers(2, 12, size=20))
    data = RatingsData.from_labels(
        users, rng.integers(0, 15, size=len(users)), timestamps=rng.integers(0, 4, len(users))
    )
    split = leave_one_out(data)
    manifest = _exporter().export_atomic(split, tmp_path)
    assert manifest["kept_users"] == len(split.users)
    parts = {
        part: pd.read_csv(tmp_path / f"ml.{part}.inter", sep="\t").set_axis(["user", "item", "t"], axis=1)
        for part in ("train", "valid", "test")
    }
    everything = pd.concat(parts.values()).sort_values("t")
    assert everything["t"].is_unique
    for i, user in enumerate(split.users.tolist()):
        train = parts["train"][parts["train"]["user"] == user].sort_values("t")["item"].tolist()
        assert train == split.train[i].tolist()
        assert parts["valid"][parts["valid"]["user"] == user]["item"].tolist() == [split.valid_items[i]]
        assert parts["test"][parts["test"]["user"] == user]["item"].tolist() == [split.test_items[i]]
        history = everything[everything["user"] == user]["item"].tolist()
        assert history[:-1] == split.history("test")[i].tolist()
    items = pd.read_csv(tmp_path / "ml.item", sep="\t")
    assert items.iloc[:, 0].tolist() == list(range(split.num_items))
