"""How masked-LM pre-training batches its texts: random batches, batches grouped by length, or packed rows.

An epoch of the ``mlm`` recipe over the clothing-review pre-training texts (all-MiniLM-L6-v2 + MLM head, batch 32,
128 word pieces at most), batched three ways:

* ``random``: batches of texts drawn at random, each cut to its longest text (``data.group_by_length: false``);
* ``grouped``: batches of texts of similar length (``data.group_by_length: true``,
  :mod:`embreg.batching.length_grouped_batches`), each cut to its longest text;
* ``packed``: texts ([CLS] ... [SEP] each) laid end to end and cut into rows of 128 word pieces, 32 rows a batch
  (Hugging Face's ``run_mlm.py`` grouping: no padding at all, but fewer, fuller steps, texts cut at row ends and
  attending to their neighbours in a row: it changes what is learnt, not only how fast).

Each scheme's epoch is built as training builds it (seed 0); the tokens it computes (rows x columns of its batches,
padding included) are counted over the whole epoch. Its time is measured on a systematic sample of its batches
(the epoch's batches sorted by length, every k-th), one full training step each (masking, forward, loss, backward,
clipping, AdamW update), the schemes interleaved batch by batch so that a change in machine load hits them alike; the
epoch time is the sample's mean step times the epoch's batches. The ratio of two epoch times is the speed-up.

    python benchmarks/mlm_batching.py --sample 12 --threads 1

writes ``docs/results/mlm-batching/mlm-batching.json``, the table as that folder's ``README.md`` and its
``summary.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from embreg.batching.batches import TensorBatches
from embreg.batching.length_grouped_batches import LengthGroupedBatches
from embreg.data.mlm_masking import BertMasking
from embreg.models.encoder_classifier import encode_texts
from embreg.models.encoder_mlm import MaskedLanguageModel
from embreg.models.pretrained import load_pretrained
from embreg.recipes import load_recipe
from embreg.studies.hub import write_benchmark_summary
from embreg.tasks.mlm.task import pretraining_texts

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "mlm-batching"
SCHEMES = ("random", "grouped", "packed")
TARGET = 1.2
"""The project's bar for a batching that ships as the default: an epoch at least this much faster than random."""
LABELS = {
    "random": "random batches, each cut to its longest text",
    "grouped": "batches grouped by length (`data.group_by_length: true`)",
    "packed": "texts packed end to end, cut into 128-piece rows",
}


def packed_rows(ids: torch.Tensor, attention: torch.Tensor, width: int) -> dict[str, torch.Tensor]:
    """The texts' word pieces (each its own [CLS] ... [SEP]) laid end to end and cut every ``width`` pieces, as
    Hugging Face's ``run_mlm.py`` groups texts (a text may run on into the next row; the last row is padded)."""
    stream = ids[attention.bool()]
    rows = -(-stream.numel() // width)
    out = torch.zeros(rows * width, dtype=torch.long)
    out[: stream.numel()] = stream
    mask = (torch.arange(rows * width) < stream.numel()).long()
    return {"input_ids": out.view(rows, width), "attention_mask": mask.view(rows, width)}


def epoch_batches(scheme: str, tensors: dict[str, torch.Tensor], batch_size: int) -> list[dict[str, torch.Tensor]]:
    """One epoch's batches of ``scheme`` (seed 0), each cut to its longest row (what the model computes on)."""
    if scheme == "grouped":
        lengths = tensors["attention_mask"].sum(dim=1)
        source: TensorBatches = LengthGroupedBatches(tensors, lengths, batch_size, seed=0)
    elif scheme == "packed":
        source = TensorBatches(packed_rows(tensors["input_ids"], tensors["attention_mask"], 128), batch_size, seed=0)
    else:
        source = TensorBatches(tensors, batch_size, seed=0)
    batches = []
    for batch in source.epoch(0):
        width = int(batch["attention_mask"].sum(dim=1).max())
        batches.append({k: v[:, :width].contiguous() for k, v in batch.items()})
    return batches


def systematic_sample(batches: list[dict[str, torch.Tensor]], size: int) -> list[dict[str, torch.Tensor]]:
    """``size`` batches at evenly spaced ranks of the epoch's batches sorted by computed tokens."""
    ranked = sorted(batches, key=lambda b: b["input_ids"].numel())
    step = len(ranked) / size
    return [ranked[int((i + 0.5) * step)] for i in range(size)]


class Stepper:
    """The MLM model and its AdamW optimizer, timing one full training step on a batch."""

    def __init__(self, model: MaskedLanguageModel, masking: BertMasking) -> None:
        self.model, self.masking = model.train(), masking
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-5)
        self.generator = torch.Generator().manual_seed(0)

    def step(self, batch: dict[str, torch.Tensor]) -> float:
        started = time.perf_counter()
        inputs, labels = self.masking(batch["input_ids"], batch["attention_mask"], self.generator)
        masked = {"input_ids": inputs, "attention_mask": batch["attention_mask"], "labels": labels}
        self.optimizer.zero_grad(set_to_none=True)
        self.model.loss(masked, self.model(masked)).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        return time.perf_counter() - started


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", type=int, default=12, help="timed batches per scheme")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--host-note", default="", help="how busy the machine was (recorded with the results)")
    parser.add_argument("--out-dir", type=Path, default=OUT, help="output folder (default: %(default)s)")
    parser.add_argument("--render-only", action="store_true", help="rewrite the page from the folder's JSON record")
    args = parser.parse_args()
    if args.render_only:
        write_page(args.out_dir, json.loads((args.out_dir / "mlm-batching.json").read_text()))
        return
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    recipe = load_recipe("mlm")
    batch_size, max_length = recipe.train.batch_size, recipe.data.max_length
    encoder, tokenizer = load_pretrained(recipe.model.pretrained, progress=False)
    masking = BertMasking(len(tokenizer), tokenizer.all_special_ids, int(tokenizer.mask_token_id))
    splits, _ = pretraining_texts(recipe.data)
    tensors = encode_texts(tokenizer, splits["train"], max_length)
    real_tokens = int(tensors["attention_mask"].sum())
    epochs = {scheme: epoch_batches(scheme, tensors, batch_size) for scheme in SCHEMES}
    samples = {scheme: systematic_sample(epochs[scheme], args.sample) for scheme in SCHEMES}
    stepper = Stepper(MaskedLanguageModel(encoder), masking)
    load_before = os.getloadavg()
    started = _utc_now()
    stepper.step(samples["random"][-1])  # warm-up: allocator, lazy initialisation
    times: dict[str, list[float]] = {scheme: [] for scheme in SCHEMES}
    for i in range(args.sample):
        for scheme in SCHEMES:
            times[scheme].append(stepper.step(samples[scheme][i]))
    record = {
        "command": "python benchmarks/mlm_batching.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, cpu, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}, "
        f"run {started}-{_utc_now()} UTC",
        "load_average": [round(x, 2) for x in (*load_before, *os.getloadavg())],
        "host_note": args.host_note,
        "batch_size": batch_size,
        "max_length": max_length,
        "texts": len(splits["train"]),
        "real_tokens": real_tokens,
        "sample": args.sample,
        "schemes": {
            scheme: {
                "batches": len(epochs[scheme]),
                "computed_tokens": sum(b["input_ids"].numel() for b in epochs[scheme]),
                "sample_step_seconds": times[scheme],
                "sample_tokens": [b["input_ids"].numel() for b in samples[scheme]],
                "epoch_minutes": statistics.fmean(times[scheme]) * len(epochs[scheme]) / 60,
            }
            for scheme in SCHEMES
        },
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "mlm-batching.json").write_text(json.dumps(record, indent=2) + "\n")
    write_page(args.out_dir, record)


def reading(record: dict) -> str:
    """What the record says about the three batchings."""
    minutes = {name: s["epoch_minutes"] for name, s in record["schemes"].items()}
    grouped, packed = minutes["random"] / minutes["grouped"], minutes["random"] / minutes["packed"]
    steps = {name: s["batches"] for name, s in record["schemes"].items()}
    text = (
        f"grouping the texts by length makes the epoch {grouped:.2f}x as fast as random batches, for the same texts, "
        "the same masking law, the same number of optimizer steps and the same computation on each text (padding "
        "is never attended to nor predicted); it "
        + ("meets" if grouped >= TARGET else "misses")
        + f" the {TARGET}x bar and is the `mlm` task's default (`data.group_by_length: true`). "
    )
    if packed <= grouped:
        return text + (
            f"Packing gives {packed:.2f}x, no more than grouping, and changes the training itself ({steps['packed']} "
            f"larger steps instead of {steps['grouped']}; texts cut at row ends and attending to their neighbours): "
            "it is not shipped."
        )
    return text + (
        f"Packing gives {packed:.2f}x, {packed / grouped:.2f}x the grouped epoch, but changes the training itself "
        f"({steps['packed']} larger steps instead of {steps['grouped']}; texts cut at row ends and attending to "
        "their neighbours), so a run with it is not the recipe's run made faster: it is not shipped."
    )


def write_page(out: Path, record: dict) -> None:
    """``README.md`` (the table and its reading) and ``summary.json`` of a record."""
    schemes = record["schemes"]
    base = schemes["random"]["epoch_minutes"]
    rows = [
        f"| {LABELS[name]} | {s['batches']} | {s['computed_tokens']:,} | {record['real_tokens'] / s['computed_tokens']:.0%} "
        f"| {statistics.fmean(s['sample_step_seconds']):.2f} | {s['epoch_minutes']:.1f} | {base / s['epoch_minutes']:.2f}x |"
        for name, s in schemes.items()
    ]
    grouped, packed = base / schemes["grouped"]["epoch_minutes"], base / schemes["packed"]["epoch_minutes"]
    load = record["load_average"]
    lines = [
        "# Masked-LM pre-training: batching the texts by length",
        "",
        f"Command: `{record['command']}`  ",
        f"Machine: {record['machine']}; load average (1, 5, 15 min) {load[0]}, {load[1]}, {load[2]} before and "
        f"{load[3]}, {load[4]}, {load[5]} after" + (f"; {record['host_note']}" if record["host_note"] else "") + ".  ",
        f"Data: one epoch of the `mlm` recipe over its {record['texts']:,} pre-training reviews ({record['real_tokens']:,} "
        f"word pieces, at most {record['max_length']} a text), batch {record['batch_size']}, seed 0; "
        f"all-MiniLM-L6-v2 + MLM head, one full training step per timed batch ({record['sample']} batches per "
        "scheme at evenly spaced ranks of the epoch's batches sorted by size, the schemes interleaved). No GPU was "
        "lent to this run.",
        "",
        "| batching | steps per epoch | tokens computed per epoch | of them word pieces | mean sampled step (s) "
        "| epoch (min) | speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Reading: {reading(record)}",
    ]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    write_benchmark_summary(
        out,
        "mlm-batching",
        "Masked-LM pre-training epoch time: random batches, length-grouped batches, packed rows",
        "sse-stochastic-shared-embeddings.txt",
        [
            {
                "claim": f"Batches grouped by length make an MLM pre-training epoch >= {TARGET}x as fast as random "
                "batches (target)",
                "reading": f"{grouped:.2f}x (packed rows {packed:.2f}x)",
                "verdict": "met" if grouped >= TARGET else "not met",
                "p": None,
            }
        ],
        {"description": record["machine"]},
        record["command"],
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
