"""Write an embreg leave-one-out split as RecBole atomic files, so RecBole trains and tests on the same examples.

Runs in embreg's venv. ``export_atomic(split, out_dir)`` writes, for a :class:`embreg.data.sequences.SequenceSplit`
(Kang & McAuley 2018, "Self-Attentive Sequential Recommendation": per user the last item is the test target, the
second-to-last the validation target, the rest the training sequence):

- ``ml.train.inter``: every training interaction, ``ml.valid.inter``: one row per kept user (the validation item),
  ``ml.test.inter``: one row per kept user (the test item). Columns ``user_id:token``, ``item_id:token``,
  ``timestamp:float``; tokens are embreg's integer ids. The timestamps are synthetic integers that encode the
  order and nothing else: user after user (ascending id), position after position in
  ``train + [valid] + [test]``, one counter, so no two interactions share a timestamp and sorting a user's rows by
  time gives back the split's order exactly (ties in the original data were already broken by row position).
- ``ml.item``: one row ``item_id:token`` per item id ``0 .. num_items - 1``, so RecBole's item space is embreg's whole
  item space (full ranking over the same candidates), also items no kept user interacted with.
- ``split.json``: ``split.record()`` plus the file names and the timestamp rule.

These are RecBole's "benchmark" (pre-split) files for ``benchmark_filename: [train, valid, test]``: a general model
such as BPR reads them as they are. Sequential models need one row per (history, target) example instead; the
peer script ``run_recbole_sasrec.py`` (run with RecBole's own venv) builds those rows from these files.

Example:
    .venv/bin/python benchmarks/recbole_peer/export.py --out /tmp/ml100k-loo
    .venv/bin/python benchmarks/recbole_peer/export.py --out /tmp/ml100k-loo-50 --users 50
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

PARTS = ("train", "valid", "test")
INTER_HEADER = "user_id:token\titem_id:token\ttimestamp:float\n"
ITEM_HEADER = "item_id:token\n"


def _user_sequences(split: Any) -> list[tuple[int, np.ndarray]]:
    """Per kept user ``(user id, train + [valid] + [test])``; checks the split's per-user fields line up."""
    users = np.asarray(split.users, dtype=np.int64)
    valid = np.asarray(split.valid_items, dtype=np.int64)
    test = np.asarray(split.test_items, dtype=np.int64)
    if not (len(split.train) == len(users) == len(valid) == len(test)):
        raise ValueError(
            f"split has {len(users)} users but {len(split.train)} training sequences, {len(valid)} validation and "
            f"{len(test)} test items; every per-user field needs one entry per user"
        )
    if len(np.unique(users)) != len(users):
        raise ValueError("split.users has repeated user ids; a leave-one-out split keeps each user once")
    out = []
    for user, seq, v, t in zip(users.tolist(), split.train, valid.tolist(), test.tolist()):
        seq = np.asarray(seq, dtype=np.int64)
        if len(seq) == 0:
            raise ValueError(
                f"user {user} has an empty training sequence; its validation example would have no history "
                "(make the split with min_interactions >= 3)"
            )
        out.append((user, np.concatenate([seq, [v, t]]).astype(np.int64)))
    return out


def export_atomic(split: Any, out_dir: str | Path, name: str = "ml") -> dict[str, Any]:
    """Write ``split`` as RecBole atomic files ``{name}.{train,valid,test}.inter`` and ``{name}.item``.

    Args:
        split: a ``SequenceSplit`` (or any object with ``users``, ``train``, ``valid_items``, ``test_items`` and
            ``num_items``; ``record()`` is used when present).
        out_dir: folder to write to (created; existing files of the same names are replaced).
        name: RecBole dataset name, the files' prefix (RecBole's ``dataset`` setting).

    Returns:
        the manifest also written to ``split.json``.

    Raises:
        ValueError: the split's fields do not line up, an id is outside ``0 .. num_items - 1``, or a user has an
            empty training sequence.

    Example:
        >>> from types import SimpleNamespace
        >>> import tempfile
        >>> s = SimpleNamespace(users=np.array([0]), train=[np.array([2, 0])], valid_items=np.array([1]),
        ...                     test_items=np.array([3]), num_items=4)
        >>> d = tempfile.mkdtemp()
        >>> export_atomic(s, d)["rows"]
        {'train': 2, 'valid': 1, 'test': 1}
        >>> [line.split() for line in open(f"{d}/ml.test.inter").read().splitlines()]
        [['user_id:token', 'item_id:token', 'timestamp:float'], ['0', '3', '3']]
    """
    num_items = int(split.num_items)
    sequences = _user_sequences(split)
    for user, seq in sequences:
        bad = seq[(seq < 0) | (seq >= num_items)]
        if len(bad):
            raise ValueError(f"user {user} has item ids {bad[:5].tolist()} outside 0..{num_items - 1}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines: dict[str, list[str]] = {part: [INTER_HEADER] for part in PARTS}
    clock = 0
    for user, seq in sequences:
        n = len(seq)
        for position, item in enumerate(seq.tolist()):
            part = "train" if position < n - 2 else ("valid" if position == n - 2 else "test")
            lines[part].append(f"{user}\t{item}\t{clock}\n")
            clock += 1
    files = {}
    for part in PARTS:
        path = out / f"{name}.{part}.inter"
        path.write_text("".join(lines[part]))
        files[part] = path.name
    item_path = out / f"{name}.item"
    item_path.write_text(ITEM_HEADER + "".join(f"{i}\n" for i in range(num_items)))
    manifest: dict[str, Any] = dict(split.record()) if hasattr(split, "record") else {}
    manifest.update(
        {
            "dataset": name,
            "num_items": num_items,
            "kept_users": len(sequences),
            "files": {**files, "item": item_path.name},
            "rows": {part: len(lines[part]) - 1 for part in PARTS},
            "timestamps": "synthetic: one counter over users (ascending) and positions in train+[valid]+[test]",
        }
    )
    (out / "split.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Export embreg's ML-100k leave-one-out split as RecBole atomic files.")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--name", default="ml", help="RecBole dataset name (file prefix)")
    parser.add_argument("--min-interactions", type=int, default=3)
    parser.add_argument("--users", type=int, default=0, help="keep only the first N kept users (0: all)")
    args = parser.parse_args(argv)

    from embreg.data import load_ml100k
    from embreg.data.sequences import leave_one_out

    split = leave_one_out(load_ml100k().ratings, min_interactions=args.min_interactions)
    if args.users:
        split = _first_users(split, args.users)
    manifest = export_atomic(split, args.out, args.name)
    print(json.dumps(manifest["rows"]), "->", args.out)


def _first_users(split: Any, n: int) -> Any:
    """The split restricted to its first ``n`` kept users (same id spaces), for quick end-to-end checks."""
    from dataclasses import replace

    return replace(
        split,
        users=split.users[:n],
        train=list(split.train[:n]),
        valid_items=split.valid_items[:n],
        test_items=split.test_items[:n],
    )


if __name__ == "__main__":
    main()
