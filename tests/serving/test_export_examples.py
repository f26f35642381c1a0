"""docs/serving.md opens with a table that names every task, and each ``python export-example`` block of
docs/exports.md uses an export without the run directory: the block runs as written (in a folder holding
``exported/<name>``, a fresh export of a tiny run) and its result equals the run's own ``predict``, ``recommend``,
``score`` or ``translate``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from embreg.registry import REGISTRY
from embreg.serving import load
from embreg.serving.exporting import export

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "serving.md"
EXPORTS_PAGE = ROOT / "docs" / "exports.md"
Check = Callable[[Any, dict[str, Any]], None]


def examples() -> dict[str, str]:
    """``{name: code}`` of the page's ``python export-example`` blocks, named by the ``exported/<name>`` they read."""
    found = {}
    for block in re.findall(r"```python export-example\n(.*?)```", EXPORTS_PAGE.read_text(), flags=re.S):
        names = re.findall(r'Path\("exported/([\w-]+)"\)', block)
        assert len(names) == 1, f"an example reads one export directory: {block[:200]}"
        found[names[0]] = block
    return found


def _rating(run: Any, ns: dict[str, Any]) -> None:
    user, item = run.vocabularies["user"].indices([196]), run.vocabularies["item"].indices([242])
    with torch.no_grad():
        ours = run.model({"user": torch.as_tensor(user), "item": torch.as_tensor(item)}).predictions
    assert ns["rating"] == pytest.approx(float(ours[0]), rel=1e-5)


def _ranking(run: Any, ns: dict[str, Any]) -> None:
    assert ns["top"] == run.recommend([196], k=10, include_seen=True)["item"].tolist()


def _next_item(run: Any, ns: dict[str, Any]) -> None:
    ours = run.recommend(None, k=10, include_seen=True, history=[50, 172, 133])
    assert ns["next_items"] == ours["item"].tolist()


def _ctr(run: Any, ns: dict[str, Any]) -> None:
    ours = run.predict(pd.DataFrame([{"site": "s1", "device": "d2", "price": 0.3}])).table
    assert ns["probability"] == pytest.approx(float(ours["click_probability"][0]), rel=1e-5)


def _lm(run: Any, ns: dict[str, Any]) -> None:
    assert ns["perplexity"] == pytest.approx(float(run.score(["the cat sat on a mat"])["perplexity"][0]), rel=1e-5)


def _encoder_logits(run: Any, texts: list[str]) -> torch.Tensor:
    from embreg.models.encoder_classifier import encode_texts
    from embreg.models.pretrained import load_pretrained

    _, tokenizer = load_pretrained(run.recipe.model.pretrained, progress=False)
    with torch.no_grad():
        return run.model(encode_texts(tokenizer, texts, run.recipe.data.max_length)).predictions


def _classification(run: Any, ns: dict[str, Any]) -> None:
    names = run.vocabularies["label"].labels.tolist()
    assert list(ns["id2label"].values()) == names and names != ["LABEL_0", "LABEL_1"]
    torch.testing.assert_close(ns["logits"], _encoder_logits(run, ns["texts"]), rtol=1e-5, atol=1e-5)
    assert ns["labels"] == run.predict(ns["texts"]).table["label"].tolist()


def _regression(run: Any, ns: dict[str, Any]) -> None:
    texts = ["good film", "the dress is not good"]
    assert ns["values"] == pytest.approx(run.predict(texts).table["value"].tolist(), rel=1e-5, abs=1e-6)


def _translation(run: Any, ns: dict[str, Any]) -> None:
    assert ns["translations"] == run.translate(ns["lines"])  # the export decodes as the run does
    assert len(ns["translations"]) == len(ns["lines"]) == 2


def _mlm(run: Any, ns: dict[str, Any]) -> None:
    batch = {key: ns["batch"][key] for key in ("input_ids", "attention_mask")}
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, ns["position"]] = 0  # score the masked position only
    with torch.no_grad():
        ours = run.model({**batch, "labels": labels}).predictions[0]
    torch.testing.assert_close(ns["logits"][0, ns["position"]], ours, rtol=1e-5, atol=1e-5)


def _tagging(run: Any, ns: dict[str, Any]) -> None:
    assert ns["tags"] == run.predict(ns["sentences"]).tags
    assert ns["sentences"][1][0] not in run.vocabularies["token"].labels  # an unknown token read as <unk>


CASES: dict[str, tuple[str, str, Check]] = {
    # example name: (task, tiny run of tests/serving/conftest.py, check)
    "mf": ("rating", "rating-ml100k", _rating),
    "bpr": ("ranking", "ranking", _ranking),
    "sasrec": ("next-item", "next-item", _next_item),
    "ctr": ("ctr", "ctr", _ctr),
    "lm": ("lm", "lm", _lm),
    "classifier": ("classification", "classification-mean", _classification),
    "regressor": ("regression", "regression", _regression),
    "translator": ("translation", "translation", _translation),
    "mlm": ("mlm", "mlm", _mlm),
    "tagger": ("tagging", "tagging", _tagging),
}


def test_the_page_shows_an_export_example_for_every_task() -> None:
    assert set(examples()) == set(CASES)
    assert {task for task, _, _ in CASES.values()} == set(REGISTRY.names("task"))


def test_the_page_opens_with_a_table_of_every_task() -> None:
    text = PAGE.read_text()
    first = text.split("\n## ")[0]
    header = "| task | command | input | output | `embreg export` writes |"
    assert header in first, "docs/serving.md opens with the table of tasks"
    rows = [line for line in first[first.index(header) :].splitlines()[2:] if line.startswith("| ")]
    tasks = [row.split("|")[1].strip() for row in rows]
    assert sorted(tasks) == sorted(REGISTRY.names("task")) and len(tasks) == len(set(tasks))
    for row in rows:
        commands = re.findall(r"`embreg (\w+)", row.split("|")[2])
        assert all(c in {"predict", "recommend", "score", "translate"} for c in commands), row


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_export_example_runs_without_the_run_directory(
    name: str, trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task, family, check = CASES[name]
    run_dir = trained(family)
    run = load(run_dir)
    assert run.task == task
    export(run, tmp_path / "exported" / name)
    record = json.loads((tmp_path / "exported" / name / "embreg_export.json").read_text())
    assert record["task"] == task and str(run_dir) not in json.dumps(record.get("model_args", {}))
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(examples()[name], f"docs/exports.md ({name})", "exec"), namespace)
    check(run, namespace)
    print(
        name,
        {
            k: namespace[k]
            for k in (
                "rating",
                "top",
                "next_items",
                "probability",
                "perplexity",
                "labels",
                "id2label",
                "values",
                "translations",
                "predicted",
                "tags",
            )
            if k in namespace
        },
    )
