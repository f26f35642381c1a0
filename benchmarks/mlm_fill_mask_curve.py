"""When does the MLM head of the shipped ``mlm`` recipe learn? Masked-token accuracy and fill-mask answers vs steps.

all-MiniLM-L6-v2 ships no masked-LM head, so the recipe puts a fresh one on it (:mod:`embreg.models.encoder_mlm`);
until that head has learnt, a fill-mask pipeline on the run's export answers the commonest word pieces ("the", "a",
",") for every blank. This script trains the recipe ``mlm`` as shipped (seed 0, one thread: the run
``embreg run mlm`` makes, with evaluations in between that change nothing it computes: no gradient, no random draw)
and, before the first step and at each step of ``--at``, scores:

* the masked-token top-1 accuracy and the perplexity of the recipe's validation texts (500 held-out reviews under
  their fixed masking: the run's ``val_accuracy`` / ``val_ppl``);
* a fill-mask check on a few fixed sentences written for it (one blank each, with the words that fit it): the top-3
  answers, and how many sentences get a fitting word first (``top-1 fits``) or among the first five.

    python benchmarks/mlm_fill_mask_curve.py --at 10 25 50 100 200 300 400 583

writes ``docs/results/mlm-fill-mask-curve/mlm-fill-mask-curve.json``, the table as that folder's ``README.md``, a
plot ``curve.png`` and ``summary.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from embreg.studies.hub import write_benchmark_summary

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "mlm-fill-mask-curve"
SENTENCES: list[tuple[str, tuple[str, ...]]] = [
    ("this dress fits perfectly and the fabric is so [MASK].", ("soft", "comfortable", "nice", "pretty", "light")),
    ("i usually wear a size small but this top runs [MASK].", ("large", "big", "small", "true", "long", "short")),
    ("the sweater is warm and very [MASK].", ("comfortable", "soft", "cozy", "cute", "pretty", "nice", "flattering")),
    ("unfortunately i had to [MASK] it because it was too short.", ("return", "send", "exchange")),
    ("love this [MASK]! i wear it all the time.", ("dress", "top", "sweater", "shirt", "skirt", "jacket", "blouse")),
    ("the material is thin and see - [MASK].", ("through",)),
    ("i bought it in [MASK] and the color is lovely.", ("black", "white", "blue", "red", "green", "grey", "pink")),
    ("these jeans are too tight in the [MASK].", ("waist", "hips", "legs", "thighs", "calves", "crotch", "back")),
]
"""Fill-mask sentences (one [MASK] each) and the words that fit the blank."""
MILESTONE = 0.5
"""``top-1 fits`` share from which the page calls the answers sensible."""


class FillMaskCheck:
    """Top answers of the model at each sentence's [MASK] (the logits a ``fill-mask`` pipeline on the export ranks)."""

    def __init__(self, tokenizer: Any, sentences: list[tuple[str, tuple[str, ...]]]) -> None:
        encoded = tokenizer([s for s, _ in sentences], padding=True, return_tensors="pt")
        mask_id = int(tokenizer.mask_token_id)
        if not bool(((encoded["input_ids"] == mask_id).sum(dim=1) == 1).all()):
            raise SystemExit("every fill-mask sentence needs exactly one [MASK]")
        self.batch = {
            "input_ids": encoded["input_ids"],
            "attention_mask": encoded["attention_mask"],
            "labels": torch.where(encoded["input_ids"] == mask_id, encoded["input_ids"], -100),
        }
        self.fits = []
        for _, words in sentences:
            ids = {tokenizer.convert_tokens_to_ids(w) for w in words if len(tokenizer.tokenize(w)) == 1}
            self.fits.append(ids)
        self.tokenizer = tokenizer

    def __call__(self, model: torch.nn.Module) -> dict[str, Any]:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            logits = model(self.batch).predictions  # (sentences, V): one [MASK] a sentence
        model.train(was_training)
        top = logits.topk(5, dim=-1).indices.tolist()
        return {
            "answers": [self.tokenizer.convert_ids_to_tokens(ids[:3]) for ids in top],
            "top1_fits": sum(ids[0] in fits for ids, fits in zip(top, self.fits, strict=True)),
            "top5_fits": sum(bool(set(ids) & fits) for ids, fits in zip(top, self.fits, strict=True)),
        }


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--at", type=int, nargs="+", default=[10, 25, 50, 100, 200, 300, 400, 583],
                        help="steps after which to score (0, before training, is always scored)")  # fmt: skip
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a recipe override, for a quick try on a slice (the page is of the recipe as shipped)")  # fmt: skip
    parser.add_argument("--host-note", default="", help="how busy the machine was (recorded with the results)")
    parser.add_argument("--out-dir", type=Path, default=OUT, help="output folder (default: %(default)s)")
    parser.add_argument("--render-only", action="store_true", help="rewrite the page from the folder's JSON record")
    args = parser.parse_args()
    if args.render_only:
        write_page(args.out_dir, json.loads((args.out_dir / "mlm-fill-mask-curve.json").read_text()))
        return
    recipe = load_recipe("mlm", ["train.progress=false", *args.overrides])
    torch.set_num_threads(recipe.train.threads or 1)
    built = build_run(recipe)
    from embreg.models.pretrained import load_pretrained

    _, tokenizer = load_pretrained(recipe.model.pretrained, progress=False)
    check = FillMaskCheck(tokenizer, SENTENCES)
    points: list[dict[str, Any]] = []
    scoring = [0.0]

    def score(model: torch.nn.Module, step: int) -> None:
        started = time.perf_counter()
        point = {"step": step, **{f"val_{k}": v for k, v in built.evaluator(model, "valid").items()}, **check(model)}
        scoring[0] += time.perf_counter() - started
        points.append(point)
        print(json.dumps(point), file=sys.stderr, flush=True)

    at = set(args.at)

    def after_step(trainer: Any, record: dict[str, Any]) -> None:
        if record["step"] in at:
            score(trainer.model, record["step"])

    load_before = os.getloadavg()
    started, clock = _utc_now(), time.perf_counter()
    trainer = built.trainer(None, step_callbacks=[after_step])
    score(trainer.model, 0)
    result = trainer.fit()
    record = {
        "command": "python benchmarks/mlm_fill_mask_curve.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, cpu, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}, "
        f"run {started}-{_utc_now()} UTC",
        "load_average": [round(x, 2) for x in (*load_before, *os.getloadavg())],
        "host_note": args.host_note,
        "overrides": args.overrides,
        "steps": len(built.batches),
        "sentences": [[s, list(words)] for s, words in SENTENCES],
        "points": points,
        "final": {k: result.metrics[k] for k in ("val_ppl", "val_accuracy", "test_ppl", "test_accuracy")},
        "seconds": time.perf_counter() - clock,
        "scoring_seconds": scoring[0],
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "mlm-fill-mask-curve.json").write_text(json.dumps(record, indent=2) + "\n")
    write_page(args.out_dir, record)


def first_sensible(record: dict) -> dict | None:
    """The first scored point from which every later point has ``top-1 fits`` >= :data:`MILESTONE` of the sentences."""
    points, n = record["points"], len(record["sentences"])
    for i, point in enumerate(points):
        if all(p["top1_fits"] >= MILESTONE * n for p in points[i:]):
            return point
    return None


def plot(out: Path, record: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [p["step"] for p in record["points"]]
    n = len(record["sentences"])
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, [p["val_accuracy"] for p in record["points"]], marker="o", label="masked-token top-1 accuracy")
    ax.plot(steps, [p["top1_fits"] / n for p in record["points"]], marker="s", label="fill-mask: top-1 fits")
    ax.set_xlabel("training step (batch of 32 reviews)")
    ax.set_ylim(0, 1)
    ax.legend(loc="lower right")
    ax.set_title("recipe mlm: the fresh MLM head learning")
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=120)
    plt.close(fig)


def write_page(out: Path, record: dict) -> None:
    """``README.md`` (the curve as a table and its reading), ``curve.png`` and ``summary.json`` of a record."""
    n = len(record["sentences"])
    rows = [
        f"| {p['step']} | {p['val_ppl']:.1f} | {p['val_accuracy']:.3f} | {p['top1_fits']}/{n} | {p['top5_fits']}/{n} | "
        + "; ".join(" ".join(a) for a in p["answers"]).replace("|", "\\|")
        + " |"
        for p in record["points"]
    ]
    sentences = [f"{i + 1}. `{s}` (fits: {', '.join(words)})" for i, (s, words) in enumerate(record["sentences"])]
    sensible = first_sensible(record)
    first, last = record["points"][0], record["points"][-1]
    when = (
        f"from step {sensible['step']} on ({sensible['step'] * 32:,} reviews, "
        f"{sensible['step'] / record['steps']:.0%} of the epoch), at least half the sentences get a fitting word "
        f"first, and the masked-token accuracy is {sensible['val_accuracy']:.3f} there"
        if sensible is not None
        else "within the epoch, fewer than half the sentences ever get a fitting word first"
    )
    load = record["load_average"]
    lines = [
        "# Masked-LM pre-training: when the fresh MLM head gives sensible fill-mask answers",
        "",
        f"Command: `{record['command']}`  ",
        f"Machine: {record['machine']}; load average (1, 5, 15 min) {load[0]}, {load[1]}, {load[2]} before and "
        f"{load[3]}, {load[4]}, {load[5]} after" + (f"; {record['host_note']}" if record["host_note"] else "") + ".  ",
        "Run: the recipe `mlm` "
        + (f"with `{' '.join(record['overrides'])}`" if record["overrides"] else "as shipped")
        + f", seed 0 ({record['steps']} steps of 32 reviews: one epoch); scored before "
        "the first step and after the listed steps on the recipe's 500 validation reviews (fixed masking) and on "
        f"{n} fill-mask sentences. Final run: val perplexity {record['final']['val_ppl']:.1f}, val accuracy "
        f"{record['final']['val_accuracy']:.3f}, test perplexity {record['final']['test_ppl']:.1f}, test accuracy "
        f"{record['final']['test_accuracy']:.3f}. No GPU was lent to this run.",
        "",
        "![masked-token accuracy and fill-mask fits vs steps](curve.png)",
        "",
        "| step | val perplexity | val masked-token accuracy | top-1 fits | top-5 fits | top-3 answers per sentence |",
        "|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
        "Sentences:",
        "",
        *sentences,
        "",
        f"Reading: before training the fresh head scores a masked-token accuracy of {first['val_accuracy']:.3f} "
        f"(perplexity {first['val_ppl']:.0f}); after the epoch {last['val_accuracy']:.3f} (perplexity "
        f"{last['val_ppl']:.1f}). {when[0].upper() + when[1:]}. `embreg run mlm` reports `val_accuracy` and "
        "`test_accuracy` beside the perplexities, so a run shows whether its head has learnt.",
    ]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    plot(out, record)
    write_benchmark_summary(
        out,
        "mlm-fill-mask-curve",
        "Masked-LM pre-training: masked-token accuracy and fill-mask answers vs steps of the shipped recipe",
        "sse-stochastic-shared-embeddings.txt",
        [
            {
                "claim": "The shipped mlm recipe's epoch gives fill-mask answers that fit (top-1 fits >= half the "
                "sentences) (target)",
                "reading": f"step {sensible['step']} of {record['steps']}" if sensible else "not within the epoch",
                "verdict": "met" if sensible else "not met",
                "p": None,
            }
        ],
        {"description": record["machine"]},
        record["command"],
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
