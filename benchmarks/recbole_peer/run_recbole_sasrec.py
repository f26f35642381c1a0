"""RecBole 1.2.1's SASRec on embreg's exact leave-one-out split: the peer run beside embreg's own SASRec.

Run it with RecBole's OWN venv (see README.md beside this file); it never imports embreg. Input: a folder written by
``export.py`` (embreg's venv): ``ml.{train,valid,test}.inter`` with ``user_id:token item_id:token
timestamp:float`` rows (timestamps synthetic, unique, in sequence order) and ``ml.item`` listing every item id.

How RecBole is fed the split (read from RecBole 1.2.1's source, ``recbole/data/dataset/sequential_dataset.py``
and ``dataset.py``):

- With ``benchmark_filename: [train, valid, test]``, ``Dataset._load_inter_feat`` reads ``ml.train.inter``,
  ``ml.valid.inter`` and ``ml.test.inter``, concatenates them, skips all filtering (``_data_processing`` only
  filters without benchmark files) and ``Dataset.build`` cuts the concatenation back into the three files' rows.
  ``SequentialDataset._change_feat_format`` does NOT run ``data_augmentation`` in that mode: every row must already
  be one example ``user_id:token  item_id_list:token_seq  item_id:token`` (history -> target);
  ``_benchmark_presets`` only adds ``item_length`` = the length of ``item_id_list``. So RecBole cannot read plain
  pre-split interaction rows for a sequential model, and this script writes the example rows itself, into a work
  folder, with the rule RecBole's own ``data_augmentation`` uses (the history is the last ``MAX_ITEM_LIST_LENGTH``
  items before the target):

  - train: for each user's training sequence ``s`` and each ``i >= 1``: ``s[max(0, i - L):i] -> s[i]`` (every
    prefix predicts its next item; a one-item training sequence gives no example);
  - valid: ``last L of s -> valid item``; test: ``last L of s + [valid item] -> test item``.

  ``alias_of_item_id: [item_id_list]`` puts the list tokens in the item id space (otherwise RecBole would give
  ``item_id_list`` an id space of its own), and ``ml.item`` makes RecBole's item space all ``num_items`` items
  (+ its padding id 0), so full ranking runs over the same candidates as embreg's.
- Why not RecBole's own route (one ``ml.inter``, ``data_augmentation``, then ``eval_args.split: {LS:
  valid_and_test}``)? It gives the same examples only for users with >= 4 interactions:
  ``_split_index_by_leave_one_out`` keeps ``min(2, rows - 1)`` rows for valid+test, so a user with 3 interactions
  (2 augmented rows) would get a test example and no validation example.
- Evaluation: for sequential models ``FullSortEvalDataLoader`` returns ``history_index = None``, so RecBole's own
  full ranking masks only its padding id 0 and ranks the user's history items too; its MRR is MRR@10 and its ranks
  come from ``torch.topk`` (ties broken arbitrarily). This script therefore reports two sets of metrics, both from
  the same trained RecBole model and its ``full_sort_predict`` scores: ``valid`` / ``test`` with embreg's protocol
  (every item except the user's whole, untruncated history, the target never excluded; rank = items scoring
  strictly higher + OTHER items scoring equal; ``ndcg@k``, ``hit@k``, untruncated ``mrr``), and
  ``recbole_native`` (``Trainer.evaluate``: no history exclusion, ``ndcg@10``, ``hit@10``, ``mrr@10``).
- Training: ``Trainer._train_epoch`` for at most ``--epochs`` epochs, each timed with ``time.perf_counter`` (with
  ``--device cuda`` between two ``torch.cuda.synchronize`` calls; the evaluation is not timed). After every epoch
  the model is scored on valid AND test with embreg's protocol (below) and the epoch's record joins ``curve``.
  Early stopping follows embreg's trainer, not RecBole's ``stopping_step``: the best epoch is the first with the
  highest validation NDCG@10 (a tie is no improvement), and with ``--patience P`` the run stops after ``P`` epochs
  in a row without improvement (``0``: never, exactly ``--epochs`` epochs). ``valid`` / ``test`` are the best
  epoch's, and RecBole's own evaluator (``recbole_native``) scores the best epoch's weights, kept in memory (RecBole's
  checkpoint files are not used). Nothing in an epoch depends on ``--epochs`` (Adam at a constant learning rate, no
  schedule; each RecBole loader draws from its own seeded generator), so the first ``E`` epochs of a longer run are
  the ``E``-epoch run: a shorter budget is read from a longer run's ``curve``.
- Device: ``--device cpu`` (default) or ``cuda`` sets RecBole's ``device``, ``use_gpu`` and ``gpu_id``; RecBole
  picks CUDA by itself whenever ``gpu_id`` is non-empty and CUDA is available, so a CPU run sets ``gpu_id: ""`` and
  the script stops if RecBole's device differs from ``--device``.

NumPy 2 and pandas 3: RecBole 1.2.1 was written for NumPy 1 and pandas < 3. ``compat_shims`` (run before RecBole is
imported) puts back the NumPy aliases it reads and the pandas 2 meaning of ``Series.agg(len)``, each only where it is
missing, so the ``numpy<2`` set-up of README.md runs unchanged; the JSON lists the shims applied.

Verification (on by default, ``--no-verify`` skips it): after RecBole has built its dataloaders, every example the
train, valid and test loaders yield is mapped back to the exported tokens (``field2id_token``) and compared, as a
multiset of (user, history, target), with the examples built from the exported files; the item space size and the
absence of a RecBole history mask are checked too. Any difference stops the run. The train loader is then
re-seeded, so verifying does not change the training run.

Example (RecBole's venv):
    TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 /work/recbole-venv/bin/python benchmarks/recbole_peer/run_recbole_sasrec.py \\
        --data /tmp/ml100k-loo --out /tmp/recbole-sasrec.json --epochs 1 --max-len 50 [--device cuda]
"""

from __future__ import annotations

import argparse
import collections
import copy
import csv
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # only matters if RecBole reloads a checkpoint

PARTS = ("train", "valid", "test")


class SplitError(RuntimeError):
    """The exported files are not a leave-one-out split, or RecBole's examples differ from it."""


def read_export(data: Path, name: str) -> dict[str, Any]:
    """The exported split: per user (token) the time-ordered training items, the valid and the test item (tokens)."""
    rows: dict[str, dict[str, list[tuple[float, int, str]]]] = {part: collections.defaultdict(list) for part in PARTS}
    for part in PARTS:
        path = data / f"{name}.{part}.inter"
        if not path.is_file():
            raise SplitError(f"{path} is missing; write the folder with export.py (embreg's venv)")
        with path.open(newline="") as handle:
            reader = csv.reader(handle, delimiter="\t")
            header = next(reader)
            fields = [h.split(":")[0] for h in header]
            for want in ("user_id", "item_id", "timestamp"):
                if want not in fields:
                    raise SplitError(f"{path} has columns {header}; it needs user_id, item_id and timestamp")
            u, i, t = (fields.index(f) for f in ("user_id", "item_id", "timestamp"))
            for line, row in enumerate(reader):
                rows[part][row[u]].append((float(row[t]), line, row[i]))
    item_path = data / f"{name}.item"
    if not item_path.is_file():
        raise SplitError(f"{item_path} is missing; it lists every item id so both libraries rank the same items")
    with item_path.open() as handle:
        items = [line.strip() for line in handle.read().splitlines()[1:] if line.strip()]
    users = sorted(set(rows["valid"]) | set(rows["test"]) | set(rows["train"]), key=_token_key)
    train, valid, test = {}, {}, {}
    for user in users:
        for part in ("valid", "test"):
            if len(rows[part].get(user, [])) != 1:
                raise SplitError(f"user {user} has {len(rows[part].get(user, []))} rows in {name}.{part}.inter, not 1")
        seq = sorted(rows["train"].get(user, []))
        if not seq:
            raise SplitError(f"user {user} has no training items: its validation example would have no history")
        times = [t for t, _, _ in seq]
        (tv, _, v_item), (tt, _, t_item) = rows["valid"][user][0], rows["test"][user][0]
        if len(set(times)) != len(times) or not times[-1] < tv < tt:
            raise SplitError(
                f"user {user}: timestamps must be distinct and ordered train < valid < test to fix the sequence order"
            )
        train[user], valid[user], test[user] = [i for _, _, i in seq], v_item, t_item
    unknown = ({i for s in train.values() for i in s} | set(valid.values()) | set(test.values())) - set(items)
    if unknown:
        raise SplitError(f"items {sorted(unknown)[:5]} are not in {item_path.name}")
    return {"users": users, "train": train, "valid": valid, "test": test, "items": items}


def _token_key(token: str) -> tuple[int, Any]:
    return (0, int(token)) if token.lstrip("-").isdigit() else (1, token)


def build_examples(split: dict[str, Any], max_len: int) -> dict[str, list[tuple[str, tuple[str, ...], str]]]:
    """(user, history of at most ``max_len`` items, target) examples per part, in tokens."""
    out: dict[str, list[tuple[str, tuple[str, ...], str]]] = {part: [] for part in PARTS}
    for user in split["users"]:
        seq = split["train"][user]
        for i in range(1, len(seq)):
            out["train"].append((user, tuple(seq[max(0, i - max_len) : i]), seq[i]))
        out["valid"].append((user, tuple(seq[-max_len:]), split["valid"][user]))
        out["test"].append((user, tuple((seq + [split["valid"][user]])[-max_len:]), split["test"][user]))
    return out


def write_sequential_files(folder: Path, name: str, examples: dict[str, Any], items: list[str]) -> None:
    """RecBole's pre-split sequential format: one ``user_id  item_id_list  item_id`` row per example."""
    folder.mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        with (folder / f"{name}.{part}.inter").open("w") as handle:
            handle.write("user_id:token\titem_id_list:token_seq\titem_id:token\n")
            for user, history, target in examples[part]:
                handle.write(f"{user}\t{' '.join(history)}\t{target}\n")
    (folder / f"{name}.item").write_text("item_id:token\n" + "".join(f"{i}\n" for i in items))


def recbole_config_dict(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    loss = args.loss
    return {
        "data_path": str(work),
        "checkpoint_dir": str(work / "saved"),
        "benchmark_filename": list(PARTS),
        "load_col": {"inter": ["user_id", "item_id_list", "item_id"], "item": ["item_id"]},
        "alias_of_item_id": ["item_id_list"],
        "TIME_FIELD": None,
        "MAX_ITEM_LIST_LENGTH": args.max_len,
        # RecBole's Config sets its device itself: CUDA whenever gpu_id is non-empty and CUDA is available, and it
        # writes gpu_id to CUDA_VISIBLE_DEVICES; an empty gpu_id is the only way to keep a CPU run on the CPU.
        "device": args.device,
        "use_gpu": args.device == "cuda",
        "gpu_id": os.environ.get("CUDA_VISIBLE_DEVICES", "0") if args.device == "cuda" else "",
        "worker": 0,
        "seed": args.seed,
        "reproducibility": True,
        "show_progress": False,
        "state": "WARNING",
        "epochs": args.epochs,
        "stopping_step": args.epochs + 1,
        "train_batch_size": args.batch_size,
        "eval_batch_size": args.eval_batch_size,
        "learner": "adam",
        "learning_rate": args.lr,
        "weight_decay": args.weight_decay,
        "train_neg_sample_args": None if loss == "CE" else {"distribution": "uniform", "sample_num": 1},
        "loss_type": loss,
        "hidden_size": args.hidden,
        "inner_size": args.inner_size or args.hidden,
        "n_layers": args.layers,
        "n_heads": args.heads,
        "hidden_dropout_prob": args.dropout,
        "attn_dropout_prob": args.dropout,
        "hidden_act": args.hidden_act,
        "eval_args": {"split": {"LS": "valid_and_test"}, "order": "TO", "group_by": "user", "mode": "full"},
        "metrics": ["NDCG", "Hit", "MRR"],
        "topk": [10],
        "valid_metric": "NDCG@10",
    }


def loader_examples(loader: Any, dataset: Any) -> list[tuple[str, tuple[str, ...], str]]:
    """Every example a RecBole loader yields, mapped back to tokens (padding checked)."""
    items = dataset.field2id_token["item_id"]
    users = dataset.field2id_token["user_id"]
    out = []
    for batch in loader:
        inter = batch[0] if isinstance(batch, tuple) else batch
        if isinstance(batch, tuple) and batch[1] is not None:
            raise SplitError("RecBole returned a history mask for a sequential model; this script assumes none")
        seqs, lens = inter["item_id_list"].numpy(), inter["item_length"].numpy()
        for u, seq, n, t in zip(inter["user_id"].tolist(), seqs, lens.tolist(), inter["item_id"].tolist()):
            if (seq[n:] != 0).any() or (seq[:n] == 0).any():
                raise SplitError(f"user {users[u]}: item_id_list {seq.tolist()} is not right-padded to length {n}")
            out.append((str(users[u]), tuple(str(items[i]) for i in seq[:n].tolist()), str(items[t])))
    return out


def verify(loaders: dict[str, Any], dataset: Any, expected: dict[str, list], num_items: int) -> dict[str, Any]:
    if dataset.item_num != num_items + 1:
        raise SplitError(f"RecBole has {dataset.item_num - 1} items (+ padding), the export {num_items}")
    counts = {}
    for part in PARTS:
        got = collections.Counter(loader_examples(loaders[part], dataset))
        want = collections.Counter(expected[part])
        if got != want:
            missing, extra = list((want - got).elements())[:3], list((got - want).elements())[:3]
            raise SplitError(f"RecBole's {part} examples differ from the export: missing {missing}, extra {extra}")
        counts[part] = sum(got.values())
    return {"exact": True, "examples": counts}


def embreg_protocol_metrics(
    model: Any, loader: Any, dataset: Any, histories: dict[str, list[str]], ks: list[int], device: Any
):
    """Full ranking over every item except the user's whole history (target kept), pessimistic ties."""
    import torch

    users, item_ids = dataset.field2id_token["user_id"], dataset.field2token_id["item_id"]
    sums = collections.defaultdict(float)
    n = 0
    model.eval()
    with torch.no_grad():
        for inter, _, _, _ in loader:
            inter = inter.to(device)
            scores = model.full_sort_predict(inter).view(len(inter), -1).clone()
            scores[:, 0] = -math.inf  # RecBole's padding id is no item
            targets = inter["item_id"]
            rows, cols = [], []
            for r, (u, target) in enumerate(zip(inter["user_id"].tolist(), targets.tolist())):
                hist = {item_ids[i] for i in histories[str(users[u])]} - {target}
                rows += [r] * len(hist)
                cols += list(hist)
            index = (
                torch.tensor(rows, dtype=torch.long, device=device),
                torch.tensor(cols, dtype=torch.long, device=device),
            )
            scores[index] = -math.inf
            target_scores = scores.gather(1, targets.view(-1, 1))
            ranks = (scores > target_scores).sum(1) + (scores == target_scores).sum(1) - 1
            for k in ks:
                hit = (ranks < k).double()
                sums[f"ndcg@{k}"] += float((hit / torch.log2(ranks.double() + 2)).sum())
                sums[f"hit@{k}"] += float(hit.sum())
            sums["mrr"] += float((1.0 / (ranks.double() + 1)).sum())
            n += len(inter)
    return {key: value / n for key, value in sums.items()}


def compat_shims() -> list[str]:
    """Let RecBole 1.2.1 run on NumPy 2 and pandas 3; call before RecBole is imported. Returns the shims applied.

    Each shim is applied only where the old behaviour is missing, so with the ``numpy<2`` / ``pandas<2.3`` recipe
    (README.md) nothing changes:

    - ``np.float_``, ``np.complex_``, ``np.unicode_`` (removed in NumPy 2.0): RecBole's
      ``Config.compatibility_settings`` reads all three (to set ``np.float = np.float_`` etc., which its evaluator
      then uses), so ``Config(...)`` raises ``AttributeError`` without them. Aliased to ``np.float64``,
      ``np.complex128``, ``np.str_``, what they were.
    - ``Series.agg(len)``: pandas < 3 applied ``len`` to each element (the length of each ``token_seq`` list); pandas 3
      calls it on the whole Series (one number). RecBole's ``Dataset._remap`` (and its normalisation and
      discretisation of sequence fields) split the re-mapped ids at ``np.cumsum(feat[field].agg(len))``, so under
      pandas 3 ``item_id_list`` fails with "Length of values (1) does not match length of index". ``Series.agg`` is
      wrapped so that ``agg(len)`` maps ``len`` over the elements again; every other call goes to pandas unchanged.
    """
    import numpy as np
    import pandas as pd

    applied = []
    for name, value in (("float_", np.float64), ("complex_", np.complex128), ("unicode_", np.str_)):
        if not hasattr(np, name):
            setattr(np, name, value)
            applied.append(f"numpy.{name}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas 2.x warns that agg(len) will change
        elementwise = isinstance(pd.Series([[0, 0]]).agg(len), pd.Series)
    if not elementwise:
        pandas_agg = pd.Series.agg

        def agg(self, func=None, axis=0, *args, **kwargs):
            if func is len and not args and not kwargs:
                return self.map(len)
            return pandas_agg(self, func, axis, *args, **kwargs)

        pd.Series.agg = agg
        applied.append("pandas.Series.agg(len)")
    if hasattr(pd.errors, "ChainedAssignmentError"):
        # pandas 3 (copy-on-write) warns that RecBole's ``df[field].fillna(..., inplace=True)`` no longer fills. It
        # only ever fills missing values, and the exported rows have none (an empty history is never written; the
        # loader check compares every example), so the warning is silenced rather than RecBole patched.
        warnings.filterwarnings("ignore", category=pd.errors.ChainedAssignmentError)
    return applied


def synchronize(device: Any) -> None:
    """Wait for the GPU's queued work, so ``time.perf_counter`` times the work itself (a no-op on the CPU)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(args: argparse.Namespace) -> dict[str, Any]:
    warnings.filterwarnings("ignore", category=FutureWarning)  # pandas/torch deprecations inside RecBole 1.2.1
    shims = compat_shims()  # before RecBole is imported
    import numpy as np
    import pandas as pd
    import recbole
    import torch
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import get_model, get_trainer, init_seed

    if args.threads:
        torch.set_num_threads(args.threads)
    data = Path(args.data).resolve()
    split = read_export(data, args.name)
    expected = build_examples(split, args.max_len)
    work = Path(args.work_dir).resolve() if args.work_dir else Path(tempfile.mkdtemp(prefix="recbole-sasrec-"))
    write_sequential_files(work / args.name, args.name, expected, split["items"])
    config_dict = recbole_config_dict(args, work)
    cwd = os.getcwd()
    os.chdir(work)  # RecBole's Trainer writes log_tensorboard/ into the working directory
    try:
        t0 = time.perf_counter()
        argv, sys.argv = sys.argv, sys.argv[:1]  # RecBole's Config also parses --key=value from the command line
        try:
            config = Config(model="SASRec", dataset=args.name, config_dict=config_dict)
        finally:
            sys.argv = argv
        if config["device"].type != args.device:
            raise SystemExit(f"RecBole chose device {config['device']}, not --device {args.device} (is CUDA there?)")
        device = config["device"]
        init_seed(config["seed"], config["reproducibility"])
        dataset = create_dataset(config)
        train_data, valid_data, test_data = data_preparation(config, dataset)
        dataset_seconds = time.perf_counter() - t0
        loaders = {"train": train_data, "valid": valid_data, "test": test_data}
        verification: dict[str, Any] = {"exact": None, "skipped": True}
        if not args.no_verify:
            t0 = time.perf_counter()
            verification = verify(loaders, dataset, expected, len(split["items"]))
            verification["seconds"] = time.perf_counter() - t0
        train_data.generator.manual_seed(config["seed"])  # as if the loader had not been iterated
        init_seed(config["seed"], config["reproducibility"])
        model = get_model(config["model"])(config, train_data._dataset).to(device)
        trainer = get_trainer(config["MODEL_TYPE"], config["model"])(config, model)
        trainer.eval_collector.data_collect(train_data)
        histories = {
            "valid": {u: split["train"][u] for u in split["users"]},
            "test": {u: split["train"][u] + [split["valid"][u]] for u in split["users"]},
        }
        curve: list[dict[str, Any]] = []
        best_value, best_state, since_best = -math.inf, None, 0
        for epoch in range(1, args.epochs + 1):
            synchronize(device)
            t0 = time.perf_counter()
            loss = trainer._train_epoch(train_data, epoch - 1, show_progress=False)
            synchronize(device)  # the last batch's backward and step may still be queued on the GPU
            record: dict[str, Any] = {"epoch": epoch, "seconds": time.perf_counter() - t0}
            record["train_loss"] = float(sum(loss) if isinstance(loss, tuple) else loss) / len(train_data)
            t0 = time.perf_counter()
            for part, loader in (("valid", valid_data), ("test", test_data)):
                record[part] = embreg_protocol_metrics(model, loader, dataset, histories[part], [10], device)
            record["eval_seconds"] = time.perf_counter() - t0
            curve.append(record)
            value = record["valid"]["ndcg@10"]
            if value > best_value:
                best_value, best_state, since_best = value, copy.deepcopy(model.state_dict()), 0
            else:
                since_best += 1
            print(
                f"epoch {epoch}: {record['seconds']:.1f} s, mean batch loss {record['train_loss']:.4f}, "
                f"valid ndcg@10 {value:.4f}, test ndcg@10 {record['test']['ndcg@10']:.4f}",
                flush=True,
            )
            if args.patience and since_best >= args.patience:
                break
        best = max(curve, key=lambda r: (r["valid"]["ndcg@10"], -r["epoch"]))  # the first epoch of the highest
        model.load_state_dict(best_state)
        native, eval_seconds = {}, {}
        for part, loader in (("valid", valid_data), ("test", test_data)):
            t0 = time.perf_counter()
            native[part] = {k: float(v) for k, v in trainer.evaluate(loader, load_best_model=False).items()}
            eval_seconds[f"{part}_recbole_native"] = time.perf_counter() - t0
    finally:
        os.chdir(cwd)
        if not args.keep_work and not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    manifest_path = data / "split.json"
    return {
        "library": "recbole",
        "model": "SASRec",
        "recbole_version": recbole.__version__,
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "numpy_version": np.__version__,
        "pandas_version": pd.__version__,
        "compat_shims": shims,
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or None,
        "data": str(data),
        "split": json.loads(manifest_path.read_text()) if manifest_path.is_file() else None,
        "args": vars(args),
        "config": {k: v for k, v in config_dict.items() if k not in ("data_path", "checkpoint_dir")},
        "parameters": sum(p.numel() for p in model.parameters()),
        "verification": verification,
        "dataset_seconds": dataset_seconds,
        "max_epochs": args.epochs,
        "patience": args.patience or None,
        "epochs_run": len(curve),
        "stopped_early": len(curve) < args.epochs,
        "best_epoch": best["epoch"],
        "curve": curve,
        "train_seconds_per_epoch": [r["seconds"] for r in curve],
        "eval_seconds": eval_seconds,
        "valid": best["valid"],
        "test": best["test"],
        "recbole_native": native,
        "protocol": {
            "valid/test": "full ranking over all items except the user's whole history (target kept), "
            "pessimistic ties, untruncated mrr (embreg's NextItemEvaluator protocol)",
            "recbole_native": "RecBole Trainer.evaluate: full ranking over all items incl. history, topk ties, mrr@10",
            "tested": "the epoch with the best validation ndcg@10 (the first of equals); curve: every epoch",
        },
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="RecBole 1.2.1 SASRec on an exported embreg leave-one-out split.")
    parser.add_argument("--data", required=True, help="folder written by export.py")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--name", default="ml", help="dataset name (file prefix) used by export.py")
    parser.add_argument("--epochs", type=int, default=1, help="maximum epochs")
    parser.add_argument(
        "--patience", type=int, default=0, help="stop after this many epochs without a better valid ndcg@10 (0: never)"
    )
    parser.add_argument("--max-len", type=int, default=200, help="MAX_ITEM_LIST_LENGTH")
    parser.add_argument("--hidden", type=int, default=50, help="hidden_size")
    parser.add_argument("--inner-size", type=int, default=0, help="feed-forward width (0: = hidden, as SASRec)")
    parser.add_argument("--hidden-act", default="relu", help="RecBole hidden_act (SASRec: relu, RecBole: gelu)")
    parser.add_argument("--layers", type=int, default=2, help="n_layers")
    parser.add_argument("--heads", type=int, default=1, help="n_heads")
    parser.add_argument("--dropout", type=float, default=0.2, help="hidden_dropout_prob and attn_dropout_prob")
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--batch-size", type=int, default=128, help="train_batch_size (examples = prefixes)")
    parser.add_argument("--eval-batch-size", type=int, default=256)
    parser.add_argument("--loss", choices=("CE", "BPR"), default="CE")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch.set_num_threads (0: torch's default; match embreg's run)"
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="RecBole's device (cuda: one GPU)")
    parser.add_argument("--work-dir", default="", help="where to write RecBole's input (default: a temp folder)")
    parser.add_argument("--keep-work", action="store_true", help="keep the temporary work folder")
    parser.add_argument("--no-verify", action="store_true", help="skip the example-by-example split check")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.patience < 0 or args.max_len < 1 or args.hidden % args.heads:
        parser.error("need --epochs >= 1, --patience >= 0, --max-len >= 1 and --hidden divisible by --heads")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    result = run(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    summary = {k: round(v, 4) for k, v in result["test"].items()}
    seconds = [round(s, 1) for s in result["train_seconds_per_epoch"]]
    print(f"test {summary} at epoch {result['best_epoch']} of {result['epochs_run']}; train s/epoch {seconds} -> {out}")


if __name__ == "__main__":
    sys.exit(main())
