"""How far continued masked-LM pre-training moved the encoder from all-MiniLM-L6-v2, with and without SSE-SE.

Reads the encoders study ``mlm-sse-pretraining`` keeps (``<runs>/<variant slug>/seed-<s>``, each run's
``best.safetensors``) and compares each with the shipped MiniLM and with its counterpart of the same pre-training
seed (MLM against MLM + SSE):

* weights: the relative L2 change ``||theta - theta_0|| / ||theta_0||`` over every encoder weight, over the word
  embeddings, and over the Transformer layers;
* representations: the mean-pooled last-layer states (the fine-tuning recipes' pooling) of the texts the
  fine-tuning studies test on (the clothing reviews' test split of ``ft-reviews-multitask``, the polarity sentences'
  test split of ``ft-polarity``, at the recipes' 48 word pieces): the mean cosine similarity of a text's vector
  under two encoders, and linear CKA (Kornblith et al. 2019) between the two encoders' vector sets (1 = the same
  geometry up to rotation and scale).

    python benchmarks/mlm_encoder_drift.py --runs runs/mlm-sse-study

writes ``docs/results/mlm-encoder-drift/mlm-encoder-drift.json``, the tables as that folder's ``README.md`` and its
``summary.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path
from typing import Any

import torch

from embreg.models.encoder_classifier import encode_texts
from embreg.models.pretrained import load_pretrained
from embreg.recipes import load_recipe
from embreg.studies import load_study
from embreg.studies.hub import write_benchmark_summary
from embreg.studies.kept import slug
from embreg.tasks.text.task import load_text_task

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "mlm-encoder-drift"
TEXT_SETS = {"reviews test": "ft-reviews-multitask", "polarity test": "ft-polarity"}


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA of two representations of the same ``n`` inputs, ``x`` ``(n, d1)`` and ``y`` ``(n, d2)``:
    ``||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)`` on centred columns (Kornblith et al. 2019, eq. for linear kernels).

    Example:
        >>> x = torch.randn(50, 4, dtype=torch.float64)
        >>> round(linear_cka(x, 3 * x @ torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))[0]), 6)
        1.0
    """
    x = x.double() - x.double().mean(dim=0)
    y = y.double() - y.double().mean(dim=0)
    cross = torch.linalg.matrix_norm(y.T @ x) ** 2
    return float(cross / (torch.linalg.matrix_norm(x.T @ x) * torch.linalg.matrix_norm(y.T @ y)))


def relative_change(after: dict[str, torch.Tensor], before: dict[str, torch.Tensor], part: str = "") -> float:
    """``||after - before|| / ||before||`` over the float tensors whose name starts with ``part``."""
    names = [k for k, v in before.items() if k.startswith(part) and v.is_floating_point()]
    delta = sum(float(((after[k].double() - before[k].double()) ** 2).sum()) for k in names)
    norm = sum(float((before[k].double() ** 2).sum()) for k in names)
    return (delta / norm) ** 0.5


def pooled(encoder: torch.nn.Module, batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    """Mean-pooled last-layer states ``(n, D)`` of the texts, padding left out."""
    encoder.eval()
    out = []
    with torch.no_grad():
        for batch in batches:
            states = encoder(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
            out.append((states * mask).sum(dim=1) / mask.sum(dim=1))
    return torch.cat(out)


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/mlm-sse-study"), help="the study's keep_runs folder")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out-dir", type=Path, default=OUT, help="output folder (default: %(default)s)")
    parser.add_argument("--render-only", action="store_true", help="rewrite the page from the folder's JSON record")
    args = parser.parse_args()
    if args.render_only:
        write_page(args.out_dir, json.loads((args.out_dir / "mlm-encoder-drift.json").read_text()))
        return
    torch.set_num_threads(args.threads)
    study = load_study(ROOT / "studies" / "mlm-sse-pretraining.yaml")
    runs = {
        f"{label}/{seed}": args.runs / slug(label) / f"seed-{seed}"
        for label in study.variants
        for seed in study.final_seeds
    }
    missing = [label for label, path in runs.items() if not (path / "best.safetensors").is_file()]
    runs = {label: path for label, path in runs.items() if label not in missing}
    if not runs:
        raise SystemExit(f"no finished encoder under {args.runs}: run `embreg study run "
                         "studies/mlm-sse-pretraining.yaml` first (from the folder --runs is relative to)")  # fmt: skip
    base, tokenizer = load_pretrained("all-minilm-l6-v2", progress=False)
    texts = {name: load_text_task(load_recipe(recipe)).texts["test"] for name, recipe in TEXT_SETS.items()}
    batches = {}
    for name, recipe in TEXT_SETS.items():
        encoded = encode_texts(tokenizer, texts[name], load_recipe(recipe).data.max_length)
        batches[name] = [{k: v[i : i + 64] for k, v in encoded.items()} for i in range(0, len(texts[name]), 64)]
    base_state = {k: v.clone() for k, v in base.state_dict().items()}
    vectors = {"MiniLM": {name: pooled(base, b) for name, b in batches.items()}}
    states = {}
    for label, path in runs.items():
        encoder, _ = load_pretrained(path, progress=False)
        states[label] = {k: v.clone() for k, v in encoder.state_dict().items()}
        vectors[label] = {name: pooled(encoder, b) for name, b in batches.items()}

    def compare(a: str, b: str, a_state: dict, b_state: dict) -> dict[str, Any]:
        row: dict[str, Any] = {
            "weights": relative_change(a_state, b_state),
            "word_embeddings": relative_change(a_state, b_state, "embeddings.word_embeddings"),
            "layers": relative_change(a_state, b_state, "encoder.layer"),
        }
        for name in batches:
            x, y = vectors[a][name], vectors[b][name]
            row[f"cosine {name}"] = float(torch.nn.functional.cosine_similarity(x, y, dim=1).mean())
            row[f"cka {name}"] = linear_cka(x, y)
        return row

    to_minilm = {label: compare(label, "MiniLM", states[label], base_state) for label in runs}
    pairs = {}
    labels = list(study.variants)
    for seed in study.final_seeds:
        a, b = f"{labels[1]}/{seed}", f"{labels[0]}/{seed}"
        if a in states and b in states:
            pairs[f"{a} vs {b}"] = compare(a, b, states[a], states[b])
    record = {
        "command": "python benchmarks/mlm_encoder_drift.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, cpu, torch {torch.__version__}, run {_utc_now()} UTC",
        "runs": {label: str(path) for label, path in runs.items()},
        "missing": missing,
        "texts": {name: len(t) for name, t in texts.items()},
        "to_minilm": to_minilm,
        "pairs": pairs,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "mlm-encoder-drift.json").write_text(json.dumps(record, indent=2) + "\n")
    write_page(args.out_dir, record)


def _table(rows: dict[str, dict[str, Any]], text_sets: list[str], first: str) -> list[str]:
    header = f"| {first} | weights | word embeddings | layers | " + " | ".join(
        f"cosine, {n} | CKA, {n}" for n in text_sets
    )
    lines = [header + " |", "|---|" + "---:|" * (3 + 2 * len(text_sets))]
    for label, row in rows.items():
        cells = [f"{row['weights']:.4f}", f"{row['word_embeddings']:.4f}", f"{row['layers']:.4f}"]
        for name in text_sets:
            cells += [f"{row[f'cosine {name}']:.4f}", f"{row[f'cka {name}']:.4f}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def _span(values: list[float], spec: str) -> str:
    """``low-high`` of ``values`` in the format ``spec`` (one value when they agree at that precision)."""
    low, high = format(min(values), spec), format(max(values), spec)
    return low if low == high else f"{low}-{high}"


def write_page(out: Path, record: dict) -> None:
    """``README.md`` (the two tables and what they say) and ``summary.json`` of a record."""
    text_sets = list(record["texts"])
    to_minilm, pairs = record["to_minilm"], record["pairs"]
    moved = [row["weights"] for row in to_minilm.values()]
    cka_base = [row[f"cka {name}"] for row in to_minilm.values() for name in text_sets]
    reading = (
        f"continued pre-training changed {_span(moved, '.2%')} of the encoder's weight norm, and its text "
        f"representations keep a linear CKA of {_span(cka_base, '.3f')} with MiniLM's."
    )
    if pairs:
        apart = [row["weights"] for row in pairs.values()]
        cka_pairs = [row[f"cka {name}"] for row in pairs.values() for name in text_sets]
        reading += (
            f" The encoders with and without SSE-SE of one pre-training seed differ by {_span(apart, '.2%')} of it, "
            f"with a linear CKA of {_span(cka_pairs, '.3f')} between them."
        )
    missing = record.get("missing", [])
    if missing:
        reading += (
            f" Not measured: {', '.join(missing)} (no finished encoder when this ran; `python "
            "benchmarks/mlm_encoder_drift.py` again once study mlm-sse-pretraining has finished)."
        )
    sizes = ", ".join(f"{n:,} {name} texts" for name, n in record["texts"].items())
    lines = [
        "# Masked-LM pre-training: how far the encoders moved from MiniLM",
        "",
        f"Command: `{record['command']}`  ",
        f"Machine: {record['machine']}.  ",
        "Encoders: the kept runs of study [mlm-sse-pretraining](../mlm-sse-pretraining/README.md) (`best.safetensors`"
        f" of {', '.join(f'`{p}`' for p in record['runs'].values())}); texts: {sizes} (the fine-tuning studies' test "
        "splits, 48 word pieces), mean-pooled last-layer states.",
        "",
        "Weights are the relative L2 change `||a - b|| / ||b||`; cosine is the mean cosine similarity of a text's "
        "vector under the two encoders; CKA is linear CKA between their vector sets (1: the same geometry up to "
        "rotation and scale).",
        "",
        "## Each encoder against all-MiniLM-L6-v2",
        "",
        *_table(to_minilm, text_sets, "encoder"),
        "",
        "## With against without SSE-SE, same pre-training seed",
        "",
        *(_table(pairs, text_sets, "pair") if pairs else ["No pair of encoders of one seed had finished."]),
        "",
        f"Reading: {reading}",
    ]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    write_benchmark_summary(
        out,
        "mlm-encoder-drift",
        "Masked-LM pre-training: weight and representation change of the encoders from MiniLM",
        "sse-stochastic-shared-embeddings.txt",
        [],
        {"description": record["machine"]},
        record["command"],
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
