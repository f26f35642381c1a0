"""A newcomer's walk-through on small files of their own: every command as README.md and docs/ show it, run in a
fresh working directory, must succeed on its first try and give a sane answer.

Each chain checks that its commands are still on their page (whitespace and line continuations aside), then runs
them through ``embreg.cli.main``, adding only what the same pages say a user adds: the names of their files
(``--set data.path=...`` and its columns), and speed settings of this test (one epoch, tiny widths). No ``--set``
makes a command work. Every command's stderr must be plain text (no carriage returns or escape codes off a
terminal) without an error or a traceback. The pretrained encoder is a tiny random BERT
(:mod:`tests.helpers.pretrained_stub`) in place of MiniLM, so the text chains take seconds.
"""

from __future__ import annotations

import io
import random
import re
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
import yaml

import embreg
from embreg.cli import main
from tests.helpers.pretrained_stub import tiny_pretrained
from tests.helpers.recipes import set_args
from tests.helpers.tagging_files import write_conll_splits
from tests.serving.test_export_examples import CASES, examples

ROOT = Path(__file__).resolve().parents[1]
FAST = ["train.epochs=1", "train.threads=1"]  # speed only: one epoch, one thread

pytestmark = [pytest.mark.integration]

_WORDS = "the dress is good bad not a film fits small big red blue long short".split()


def _page(name: str) -> str:
    """A page's text with line continuations joined and whitespace runs made one space."""
    return " ".join((ROOT / name).read_text().replace("\\\n", " ").split())


class Newcomer:
    """Types the commands of the docs into ``embreg`` in ``folder`` and checks that each works on its first try."""

    def __init__(self, folder: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder, self.capfd, self.monkeypatch = folder, capfd, monkeypatch
        monkeypatch.chdir(folder)

    def types(
        self,
        page: str,
        shown: str,
        *,
        replace: dict[str, str] | None = None,
        sets: Sequence[str] = (),
        extra: Sequence[str] = (),
        stdin: str | None = None,
        part_of: str | None = None,
    ) -> tuple[str, str]:
        """Runs the command ``shown`` on ``page`` (or a part of the line ``part_of`` there: ``A && B``), with
        ``replace`` applied (the user's ids and names for the page's), plus ``--set`` of ``sets`` and ``extra``
        arguments; returns its stdout and stderr."""
        line = part_of or shown
        assert shown in line and " ".join(line.split()) in _page(page), f"{page} no longer shows: {line}"
        for old, new in (replace or {}).items():
            assert old in shown, (old, shown)
            shown = shown.replace(old, new)
        argv = shlex.split(shown)
        assert argv[0] == "embreg", shown
        if stdin is not None:
            self.monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        self.capfd.readouterr()
        code = main([*argv[1:], *set_args(list(sets)), *extra])
        out, err = self.capfd.readouterr()
        assert code == 0, f"{shown} failed on the first try:\n{err}"
        assert "embreg: error" not in err and "Traceback" not in err, err
        assert "\r" not in out + err and "\x1b" not in out + err, f"control codes off a terminal: {err[-500:]!r}"
        return out, err

    def trained_into(self, out: str, recipe: str) -> Path:
        """The run directory ``embreg run`` printed (``RECIPE -> DIR``) for a command without ``--out``."""
        found = re.search(rf"^{re.escape(recipe)} -> (\S+)$", out, flags=re.M)
        assert found, out
        return self.folder / found.group(1)

    def uses_export(self, name: str, export_dir: Path, run_dir: Path) -> dict[str, Any]:
        """Runs docs/exports.md's lines for ``exported/<name>`` in a folder that holds only that export (no run
        directory, no data), and checks their result against the run's own (tests/serving/test_export_examples.py)."""
        alone = self.folder / "elsewhere"
        shutil.copytree(export_dir, alone / "exported" / name)
        self.monkeypatch.chdir(alone)
        namespace: dict[str, Any] = {}
        exec(compile(examples()[name], f"docs/exports.md ({name})", "exec"), namespace)
        self.monkeypatch.chdir(self.folder)
        CASES[name][2](embreg.load(run_dir), namespace)
        return namespace


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory):
    yield from tiny_pretrained(tmp_path_factory)


@pytest.fixture
def newcomer(tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    threads = torch.get_num_threads()
    yield Newcomer(tmp_path, capfd, monkeypatch)
    torch.set_num_threads(threads)


def _sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(low, high)))


def _interactions(path: Path, rng: random.Random) -> pd.DataFrame:
    """~400 timed ratings of 40 users over a 30-item catalogue, with the guide's column names ``uid, iid, stars``."""
    rows = [
        (f"u{user:02d}", f"i{item:02d}", rng.randint(1, 5))
        for user in range(40)
        for item in sorted(rng.sample(range(30), rng.randint(6, 14)))
    ]
    table = pd.DataFrame(rows, columns=["uid", "iid", "stars"]).assign(ts=range(len(rows)))
    table.to_csv(path, index=False)
    return table


def _valid_bio(tags: list[str]) -> bool:
    return all(
        not tag.startswith("I-") or (i > 0 and tags[i - 1] in (f"B-{tag[2:]}", tag)) for i, tag in enumerate(tags)
    )


# -- BPR, SASRec, MF: recommend and predict --------------------------------------------------------------------------


def test_recommenders_on_own_ratings(newcomer: Newcomer) -> None:
    table = _interactions(newcomer.folder / "ratings.csv", random.Random(0))
    seen = table.groupby("uid")["iid"].agg(set).to_dict()

    # MF, as the guide's "your own data" shows it, into the README's runs/mf; then the README's predict
    newcomer.types(
        "docs/guide.md",
        "embreg run mf-sse-se --set data.path=ratings.csv --set data.user_col=uid --set data.item_col=iid "
        "--set data.rating_col=stars",
        sets=FAST,
        extra=["--out", "runs/mf"],
    )
    pd.DataFrame({"uid": ["u01", "u02", "stranger"], "iid": ["i03", "i05", "i07"]}).to_csv("pairs.csv", index=False)
    out, _ = newcomer.types("README.md", "embreg predict runs/mf --input pairs.csv --out predictions.csv")
    predictions = pd.read_csv("predictions.csv")
    assert out.startswith("3 rows: 2 predicted, 1 with ids unseen in training")
    assert predictions.columns.tolist() == ["uid", "iid", "rating", "status"]
    assert predictions["status"].tolist() == ["ok", "ok", "mean"] and predictions["rating"].between(1, 5).all()

    # BPR, as the README's recipe file: show, edit, run over seeds; then recommend one seed's top 10
    shown, _ = newcomer.types("README.md", "embreg show ncf", replace={"ncf": "bpr"})
    recipe = yaml.safe_load(shown)
    recipe["data"].update(path="ratings.csv", user_col="uid", item_col="iid", rating_col="stars")
    recipe["train"].update(epochs=1, threads=1)
    Path("my.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    newcomer.types("README.md", "embreg run my.yaml --seeds 5 --out runs/my", replace={"--seeds 5": "--seeds 2"})
    newcomer.types(
        "README.md",
        "embreg recommend runs/bpr --users 196,186 --k 10 --out top10.csv",
        replace={"runs/bpr": "runs/my", "196,186": "u01,u02"},
        extra=["--seed", "1"],  # docs/serving.md: one seed of a --seeds run
    )
    top = pd.read_csv("top10.csv")
    assert top.columns.tolist() == ["user", "item", "rank", "score"] and len(top) == 20
    for user, items in top.groupby("user")["item"]:
        assert items.nunique() == 10 and not set(items) & seen[user], user  # nothing the user already has
    newcomer.types(
        "docs/guide.md",
        "embreg recommend runs/bpr --all --k 10 --out top10.csv",
        replace={"runs/bpr": "runs/my"},
        extra=["--seed", "0", "--overwrite"],
    )
    assert len(pd.read_csv("top10.csv")) == 10 * len(seen)

    # SASRec on the same file with its timestamps (the guide's timed-interactions line)
    newcomer.types(
        "docs/guide.md",
        "embreg run sse-pt --set data.path=my.csv --set data.timestamp_col=ts",
        replace={"sse-pt": "sasrec", "my.csv": "ratings.csv"},
        sets=["data.user_col=uid", "data.item_col=iid", *FAST],
        extra=["--out", "runs/sasrec"],
    )
    newcomer.types(
        "docs/serving.md",
        "embreg recommend RUN --users U1,U2 --out top.csv",
        replace={"RUN": "runs/sasrec", "U1,U2": "u03,u04"},
    )
    top = pd.read_csv("top.csv")
    assert len(top) == 20 and all(not set(items) & seen[user] for user, items in top.groupby("user")["item"])
    newcomer.types(
        "docs/serving.md",
        "embreg recommend RUN --history I1,I2,I3 --k 10 --out FILE.csv",
        replace={"RUN": "runs/sasrec", "I1,I2,I3": "i01,i02,i03", "FILE.csv": "next.csv"},
    )
    following = pd.read_csv("next.csv")
    assert len(following) == 10 and not set(following["item"]) & {"i01", "i02", "i03"}


# -- masked-LM pre-training on own texts, then fine-tuning from it: predict and export -------------------------------


def _reviews(path: Path, rng: random.Random, rows: int) -> None:
    """``review,label``: the label follows the words "good" and "bad"."""
    lines = [f"{_sentence(rng, 2, 8)} {('bad', 'good')[k % 2]},{('neg', 'pos')[k % 2]}" for k in range(rows)]
    path.write_text("\n".join(["review,label", *lines]) + "\n")


def _new_reviews() -> list[str]:
    return ["the dress is good", "a bad film\u2028not long", "", "small red dress fits"]


def test_pretrain_then_fine_tune_then_predict_and_export(stub, newcomer: Newcomer) -> None:
    rng = random.Random(1)
    Path("texts.txt").write_text("".join(_sentence(rng, 4, 12) + "\n" for _ in range(200)))
    _reviews(Path("my.csv"), rng, 200)
    labelled = ["data.path=my.csv", "data.text_col=review", "data.label_col=label"]  # the guide's labelled texts
    line = "embreg run mlm-sse --out runs/mlm && embreg run ft-reviews --set model.pretrained=runs/mlm"
    pretrain, fine_tune = line.split(" && ")
    newcomer.types("README.md", pretrain, part_of=line, sets=["data.path=texts.txt", *FAST])  # nlp.md: your texts
    out, err = newcomer.types("README.md", fine_tune, part_of=line, sets=[*labelled, *FAST])
    assert "my.csv is too small for the recipe's sizes; the 80/10/10 rule" in err
    run = newcomer.trained_into(out, "ft-reviews")  # no --out: the run names its new directory
    assert "encoder: mlm run" in (run / "report.md").read_text()

    Path("new.txt").write_text("\n".join(_new_reviews()) + "\n")
    out, _ = newcomer.types(
        "docs/serving.md",
        "embreg predict RUN --input texts.txt --out out.csv",
        replace={"RUN": str(run), "texts.txt": "new.txt"},
    )
    predictions = pd.read_csv("out.csv", keep_default_na=False)
    assert out.startswith("4 texts: 3 predicted, 1 empty")
    assert predictions.columns.tolist() == ["text", "label", "probability", "status"]
    assert predictions["text"].tolist() == _new_reviews()  # U+2028 stays inside its line
    assert predictions["status"].tolist() == ["ok", "ok", "empty", "ok"]
    assert set(predictions["label"][predictions["status"] == "ok"]) <= {"pos", "neg"}
    pd.DataFrame({"id": [7, 9], "review": ["good dress", "bad film"]}).to_csv("table.csv", index=False)
    newcomer.types(
        "docs/serving.md",
        "embreg predict RUN --input FILE --out FILE.csv [--unknown mean|error|skip]",
        replace={"RUN": str(run), "--input FILE": "--input table.csv", "[--unknown mean|error|skip]": ""},
    )
    table = pd.read_csv("FILE.csv")
    assert table.columns.tolist() == ["id", "review", "label", "probability", "status"]
    assert table["id"].tolist() == [7, 9] and table["probability"].between(0, 1).all()

    newcomer.types(
        "docs/exports.md",
        "embreg export RUN --out exported/<name>",
        replace={"RUN": str(run), "<name>": "classifier"},
    )
    used = newcomer.uses_export("classifier", Path("exported/classifier"), run)
    assert set(used["labels"]) <= {"pos", "neg"} and len(used["labels"]) == len(used["texts"])


# -- a CNN text classifier on own labelled texts ---------------------------------------------------------------------


def test_cnn_text_classifier_then_predict(stub, newcomer: Newcomer) -> None:
    _reviews(Path("my.csv"), random.Random(2), 200)
    out, _ = newcomer.types(
        "docs/guide.md",
        "embreg run ft-reviews-lnsr --set data.path=my.csv --set data.text_col=review --set data.label_col=label",
        replace={"ft-reviews-lnsr": "cls-cnn-reviews"},  # docs/nlp.md: the CNN's recipe
        sets=[*FAST, "model.init_embeddings=random", "model.embedding_dim=8", "model.num_filters=4"],
    )
    run = newcomer.trained_into(out, "cls-cnn-reviews")
    Path("texts.txt").write_text("\n".join(_new_reviews()) + "\n")
    newcomer.types("docs/serving.md", "embreg predict RUN --input texts.txt --out out.csv", replace={"RUN": str(run)})
    predictions = pd.read_csv("out.csv", keep_default_na=False)
    assert predictions["text"].tolist() == _new_reviews() and len(predictions) == 4
    assert predictions["status"].tolist() == ["ok", "ok", "empty", "ok"]
    assert set(predictions["label"][predictions["status"] == "ok"]) <= {"pos", "neg"}


# -- a translator on own sentence pairs: translate, export, use the export -------------------------------------------

_GERMAN = "der die das hund katze haus baum auto rot blau gross klein".split()
_ENGLISH = "the the the dog cat house tree car red blue big small".split()


def test_translation_then_translate_export_and_use_the_export(newcomer: Newcomer) -> None:
    rng = random.Random(3)
    pairs = []
    for _ in range(300):
        words = [rng.randrange(len(_GERMAN)) for _ in range(rng.randint(1, 6))]
        pairs.append(f"{' '.join(_GERMAN[w] for w in words)}\t{' '.join(_ENGLISH[w] for w in words)}")
    Path("pairs.tsv").write_text("\n".join(["source\ttarget", *pairs]) + "\n")
    _, err = newcomer.types(
        "docs/translation.md", "embreg run translation --out runs/de-en", sets=["data.path=pairs.tsv", *FAST]
    )
    assert "dropped" not in err  # a user's file keeps every pair
    assert "300 rows used" in Path("runs/de-en/report.md").read_text()

    lines = ["der hund", "die katze ist rot\u2028und blau", "", "das haus\fist gross"]
    Path("sentences.txt").write_text("\n".join(lines) + "\n")
    out, err = newcomer.types(
        "docs/translation.md", "embreg translate runs/de-en --input sentences.txt --beam 5 --alpha 0.6 --beta 0.2"
    )
    assert len(out.splitlines()) == len(lines) and out.splitlines()[2] == ""  # one line out per line in
    assert err.startswith("4 lines translated")
    out, _ = newcomer.types(
        "docs/translation.md",
        "embreg translate runs/de-en --beam 1",
        part_of='echo "der Hund bellt" | embreg translate runs/de-en --beam 1',
        stdin="der Hund bellt\n",
    )
    assert len(out.splitlines()) == 1

    newcomer.types(
        "docs/exports.md",
        "embreg export RUN --out exported/<name>",
        replace={"RUN": "runs/de-en", "<name>": "translator"},
    )
    used = newcomer.uses_export("translator", Path("exported/translator"), Path("runs/de-en"))
    assert len(used["translations"]) == len(used["lines"])


# -- a BiLSTM-CRF tagger on own CoNLL files: tag new sentences, export ------------------------------------------------


def test_tagger_then_tag_new_sentences_and_export(newcomer: Newcomer) -> None:
    write_conll_splits(newcomer.folder)
    newcomer.types(
        "docs/nlp.md",
        "embreg run tagging-bilstm-crf --set data.path=train.txt --set data.valid_path=valid.txt "
        "--set data.test_path=test.txt --out runs/tagger",
        sets=["train.threads=1"],
    )
    sentences = ["Ann met Bo Li in Rome", "Zed went to Oslo today", "Dee Ra Kay met Cy in New York"]
    Path("sentences.txt").write_text("\n".join(sentences) + "\n")
    out, _ = newcomer.types("docs/nlp.md", "embreg predict runs/tagger --input sentences.txt --out tags.conll")
    assert out.startswith("3 sentences, 19 tokens tagged (2 unseen in training")
    blocks = [block.splitlines() for block in Path("tags.conll").read_text().strip("\n").split("\n\n")]
    assert [[row.split("\t")[0] for row in block] for block in blocks] == [s.split() for s in sentences]
    tags = [[row.split("\t")[1] for row in block] for block in blocks]
    assert all(_valid_bio(sequence) for sequence in tags), tags

    block = next(
        b
        for b in re.findall(r"```python\n(.*?)```", (ROOT / "docs/nlp.md").read_text(), flags=re.S)
        if 'embreg.load("runs/tagger")' in b
    )
    *setup, last = block.strip().splitlines()
    namespace: dict[str, Any] = {}
    exec("\n".join(setup), namespace)
    tagged = eval(last.split("#")[0], namespace)  # run.predict(["Peter moved to Rome ."]).tags
    assert len(tagged) == 1 and len(tagged[0]) == 5 and _valid_bio(tagged[0])

    newcomer.types("docs/nlp.md", "embreg export runs/tagger --out exported/tagger")
    used = newcomer.uses_export("tagger", Path("exported/tagger"), Path("runs/tagger"))
    assert all(_valid_bio(sequence) for sequence in used["tags"])
