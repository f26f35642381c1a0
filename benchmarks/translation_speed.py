"""Training speed of the ``translation`` recipe against a Hugging Face ``MarianMTModel`` of the same size, one thread.

The peer is what a user of Hugging Face would train from scratch on the same pairs: ``MarianMTModel`` with the
translator's sizes, read from the recipe (d_model, layers, heads, feed-forward; dropout everywhere, ReLU, sinusoidal
positions, scaled, shared and tied embeddings over the run's joint BPE vocabulary), Adam (0.9, 0.98, eps 1e-9) with
the inverse-square-root schedule, gradient clipping at 1.0 and Hugging Face's own ``LabelSmoother`` (epsilon 0.1),
on batches of 64 pairs made by Hugging Face's length grouping (``get_length_grouped_indices``, what
``TrainingArguments(group_by_length=True)`` uses: mega-batches of 50 batches sorted by source length) and padded to
their longest pair (``DataCollatorForSeq2Seq``'s dynamic padding, labels padded with -100).

Arms, each a sequence of training steps (forward, loss, backward, clipping, optimizer and schedule step):

* ``peer``: the Marian model on its length-grouped batches;
* ``embreg, the peer's batches``: the recipe's translator (its trainer's own step) on exactly the same batches;
* ``..., torch dropout`` / ``..., torch loss``: the same with one lever taken out: torch's ``nn.Dropout`` instead of
  :class:`embreg.nn.packed_dropout.PackedDropout`, or torch's composite label-smoothed cross-entropy instead of
  :func:`embreg.nn.label_smoothed_loss.label_smoothed_cross_entropy`;
* ``embreg, shipped batches``: the translator on the recipe's own batches (``data.batch_tokens``: pairs sorted by
  source and target length under a token budget, :mod:`embreg.batching.token_batches`);
* ``embreg, random batches``: the translator on batches of 64 pairs drawn at random (``data.batch_tokens=null``).

Every arm trains one epoch over the same ``--pairs`` pairs drawn at random from the training split (the peer in
Hugging Face's mega-batches of 50 batches, the recipe's batches sorted over all of them), the arms taking turns in
``--rounds`` rounds of a share of their epoch each, so load on the machine falls on all of them alike. The reading
is pairs per second over the epoch; the ratios are embreg's over the peer's. The recipe sorts its whole training
split where this sorts ``--pairs`` of them, which leaves more padding (the page gives both shares): the reading is
conservative.

    python benchmarks/translation_speed.py --pairs 12800 --rounds 4 [--quiet]

writes ``docs/results/translation-speed/translation-speed.json``, ``README.md`` and ``summary.json`` (the claim the
results hub shows).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch

from embreg.studies.hub import write_benchmark_summary

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "translation-speed"
TARGET = 1.2
CLAIM = f"The translation recipe trains >= {TARGET}x the pairs per second of a same-size Hugging Face Marian model"
PEER_BATCH = 64
MEGA_BATCH = 50
"""Batches per mega-batch of Hugging Face's length grouping (its default for a training set of this size)."""
DATA = ["data.max_train_pairs=null", "train.progress=false", "train.threads=1", "train.device=cpu"]


def peer_model(vocab: int, model_config) -> torch.nn.Module:  # noqa: ANN001 - the recipe's model config
    """``MarianMTModel`` from scratch with the translator's sizes and the run's special ids."""
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=vocab,
        decoder_vocab_size=vocab,
        d_model=model_config.d_model,
        encoder_layers=model_config.encoder_layers,
        decoder_layers=model_config.decoder_layers,
        encoder_attention_heads=model_config.heads,
        decoder_attention_heads=model_config.heads,
        encoder_ffn_dim=model_config.feedforward,
        decoder_ffn_dim=model_config.feedforward,
        dropout=model_config.dropout,
        attention_dropout=model_config.dropout,
        activation_dropout=model_config.dropout,
        activation_function="relu",
        max_position_embeddings=model_config.max_positions,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        forced_eos_token_id=2,
    )
    return MarianMTModel(config)


def length_grouped_batches(source: torch.Tensor, chunk: torch.Tensor, seed: int) -> list[torch.Tensor]:
    """Hugging Face's ``group_by_length`` batches of :data:`PEER_BATCH` pairs over the pairs ``chunk`` (one
    mega-batch of 50 batches, sorted by source length)."""
    from transformers.trainer_pt_utils import get_length_grouped_indices

    lengths = (source[chunk] != 0).sum(dim=1).tolist()
    generator = torch.Generator().manual_seed(seed)
    order = get_length_grouped_indices(lengths, PEER_BATCH, mega_batch_mult=MEGA_BATCH, generator=generator)
    return list(chunk[torch.as_tensor(order)].split(PEER_BATCH))


def trimmed(tensors: dict[str, torch.Tensor], index: torch.Tensor) -> dict[str, torch.Tensor]:
    """The rows ``index`` of each tensor, cut to their longest row (dynamic padding)."""
    out = {}
    for name, t in tensors.items():
        rows = t[index]
        out[name] = rows[:, : int((rows != 0).sum(dim=1).max())]
    return out


def peer_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Seq2Seq collator's batch from the translator's: ``input_ids``, ``attention_mask`` and ``labels`` (the
    target without ``<s>``, padding -100; Marian shifts them right behind ``decoder_start_token_id`` itself)."""
    labels = batch["target"][:, 1:]
    labels = labels[:, : int((labels != 0).sum(dim=1).max())].masked_fill(labels == 0, -100)
    source = batch["source"]
    return {"input_ids": source, "attention_mask": (source != 0).long(), "labels": labels}


class PeerTrainer:
    """The peer's training step: Hugging Face's label smoother, clipping at 1.0, Adam with the inverse-sqrt rate."""

    def __init__(self, model: torch.nn.Module, lr: float, warmup_steps: int) -> None:
        from transformers.trainer_pt_utils import LabelSmoother

        self.model = model.train()
        self.smoother = LabelSmoother(epsilon=0.1)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
        warmup = max(warmup_steps, 1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))
        )

    def step(self, batch: dict[str, torch.Tensor]) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        inputs = peer_inputs(batch)
        labels = inputs.pop("labels")
        outputs = self.model(**inputs, labels=labels)
        loss = self.smoother(outputs, labels, shift_labels=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        return float(loss.detach())


def torch_parts(model: torch.nn.Module, dropout: bool, loss: bool) -> None:
    """Puts torch's own parts back into a built translator, for the arms that measure what each lever pays:
    ``nn.Dropout`` (``bernoulli_`` masks) for every packed dropout, ``F.cross_entropy``'s composite label-smoothed
    loss for the hand-written backward."""
    from embreg.nn.packed_dropout import PackedDropout

    if dropout:
        for module in list(model.modules()):
            for name, child in list(module.named_children()):
                if isinstance(child, PackedDropout):
                    setattr(module, name, torch.nn.Dropout(child.p))
    if loss:

        def composite(batch: dict, output) -> torch.Tensor:  # noqa: ANN001 - the model's loss signature
            logits = output.predictions
            labels = batch.get("labels", batch["target"])[:, 1 : logits.shape[1] + 1]
            return torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(),
                labels.reshape(-1),
                ignore_index=model.pad_id,
                label_smoothing=model.label_smoothing,
            )

        model.loss = composite  # type: ignore[method-assign]


def embreg_arm(
    overrides: list[str], torch_dropout: bool = False, torch_loss: bool = False
) -> tuple[Callable[[dict], object], object]:
    """The recipe's trainer step and the built run (its data, batches and recipe); ``torch_dropout`` /
    ``torch_loss``: with that lever taken out (:func:`torch_parts`)."""
    from embreg.recipes import load_recipe
    from embreg.recipes.run import build_run

    built = build_run(load_recipe("translation", [*DATA, *overrides]))
    trainer = built.trainer(None)
    trainer.model.train()
    torch_parts(trainer.model, torch_dropout, torch_loss)

    def step(batch: dict) -> object:
        return trainer._train_step(batch, 0)  # noqa: SLF001 - the trainer's own step

    return step, built


def padding_share(batches) -> float:  # noqa: ANN001 - any iterable of batches
    """The share of padding among the ids of ``batches`` (both sides)."""
    real = padded = 0
    for batch in batches:
        for t in batch.values():
            real += int((t != 0).sum())
            padded += t.numel()
    return 1 - real / padded


def epoch_batches(tensors: dict[str, torch.Tensor], pairs: torch.Tensor, recipe) -> dict[str, list[dict]]:  # noqa: ANN001
    """Each arm's batches of one epoch over the same ``pairs``: the peer's length grouping (shared with the
    like-for-like arm), the recipe's token-budget batches, and random batches of 64."""
    from embreg.batching.token_batches import TokenBudgetBatches

    chunk_size = PEER_BATCH * MEGA_BATCH
    peer = [
        trimmed(tensors, index)
        for offset in range(0, len(pairs), chunk_size)
        for index in length_grouped_batches(tensors["source"], pairs[offset : offset + chunk_size], seed=offset)
    ]
    shipped = TokenBudgetBatches(
        {name: t[pairs] for name, t in tensors.items()},
        recipe.data.batch_tokens,
        max_examples=recipe.train.batch_size,
        seed=0,
    )
    return {
        "peer": peer,
        "embreg, the peer's batches": peer,
        "embreg, the peer's batches, torch dropout": peer,
        "embreg, the peer's batches, torch loss": peer,
        "embreg, shipped batches": list(shipped.epoch(0)),
        "embreg, random batches": [trimmed(tensors, index) for index in pairs.split(PEER_BATCH)],
    }


def measure(pairs: int, rounds: int, warmup: int = 3) -> dict:
    shipped_step, built = embreg_arm([])
    random_step, _ = embreg_arm(["data.batch_tokens=null"])
    same_step, _ = embreg_arm([])
    torch_dropout_step, _ = embreg_arm([], torch_dropout=True)
    torch_loss_step, _ = embreg_arm([], torch_loss=True)
    recipe = built.recipe
    tensors = built.prepared.tensors["train"]
    peer = PeerTrainer(
        peer_model(built.prepared.target_vocab_size, recipe.model.config),
        recipe.train.lr,
        int(recipe.train.warmup * len(built.batches) * recipe.train.epochs),
    )
    steps: dict[str, Callable[[dict], object]] = {
        "peer": peer.step,
        "embreg, the peer's batches": same_step,
        "embreg, the peer's batches, torch dropout": torch_dropout_step,
        "embreg, the peer's batches, torch loss": torch_loss_step,
        "embreg, shipped batches": shipped_step,
        "embreg, random batches": random_step,
    }
    chosen = torch.randperm(tensors["source"].shape[0], generator=torch.Generator().manual_seed(0))[:pairs]
    batches = epoch_batches(tensors, chosen, recipe)
    for label, step in steps.items():  # warm-up steps, not timed
        for batch in batches[label][-warmup:]:
            step(batch)
    totals = {label: {"seconds": 0.0, "pairs": 0, "tokens": 0, "padded": 0, "steps": 0} for label in steps}
    per_round: dict[str, list[float]] = {label: [] for label in steps}
    for round_index in range(rounds):
        for label, step in steps.items():
            share = len(batches[label])
            todo = batches[label][round_index * share // rounds : (round_index + 1) * share // rounds]
            began = time.perf_counter()
            for batch in todo:
                step(batch)
            seconds = time.perf_counter() - began
            done = sum(int(b["source"].shape[0]) for b in todo)
            totals[label]["seconds"] += seconds
            totals[label]["pairs"] += done
            totals[label]["steps"] += len(todo)
            for b in todo:
                totals[label]["tokens"] += int(sum((t != 0).sum() for t in b.values()))
                totals[label]["padded"] += int(sum(t.numel() for t in b.values()))
            per_round[label].append(seconds)
    readings = {}
    for label, total in totals.items():
        assert total["pairs"] == pairs, (label, total["pairs"])  # every arm trains on every chosen pair once
        readings[label] = {
            "pairs_per_second": total["pairs"] / total["seconds"],
            "epoch_seconds": total["seconds"],
            "round_seconds": per_round[label],
            "seconds_per_step": total["seconds"] / total["steps"],
            "pairs_per_step": total["pairs"] / total["steps"],
            "padding_share": 1 - total["tokens"] / total["padded"],
            "steps": total["steps"],
        }
    peer_rate = readings["peer"]["pairs_per_second"]
    for label in steps:
        readings[label]["ratio_to_peer"] = readings[label]["pairs_per_second"] / peer_rate
    return {
        "train_pairs": int(tensors["source"].shape[0]),
        "pairs": pairs,
        "recipe_batches_per_epoch": len(built.batches),
        "recipe_padding_share": padding_share(built.batches.epoch(0)),
        "random_padding_share": padding_share(
            trimmed(tensors, i)
            for i in torch.randperm(len(tensors["source"]), generator=torch.Generator().manual_seed(0)).split(64)
        ),
        "batch_tokens": recipe.data.batch_tokens,
        "batch_size": recipe.train.batch_size,
        "arms": readings,
        "ratio": readings["embreg, shipped batches"]["ratio_to_peer"],
    }


def markdown(record: dict) -> str:
    m = record["machine"]
    lines = [
        "# Training speed of the translation recipe against a same-size Hugging Face Marian model",
        "",
        "Generated by `benchmarks/translation_speed.py`; do not edit. Method: the module docstring of",
        "[benchmarks/translation_speed.py](../../../benchmarks/translation_speed.py).",
        "",
        f"{record['train_pairs']:,} training pairs of the `translation` recipe's split (trans-de-en, at least 3 words "
        f"a side); the recipe's batches: at most {record['batch_size']} pairs and {record['batch_tokens']} padded "
        f"tokens a side: {record['recipe_batches_per_epoch']} batches per epoch over the whole training split, "
        f"{record['recipe_padding_share']:.1%} of their ids padding, against {record['random_padding_share']:.1%} "
        "in batches of 64 pairs drawn at random, each cut to its longest pair. One torch thread. Every arm "
        f"trains one epoch over the same {record['pairs']:,} pairs drawn at random from the training split, in its "
        f"own batches, the arms taking turns in {record['rounds']} rounds of a share of their epoch each; 3 "
        "warm-up steps per arm come first, untimed.",
        "",
        "| arm | pairs/s | ratio to the peer | epoch seconds | steps | s/step | pairs/step | padding share |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in record["arms"].items():
        lines.append(
            f"| {label} | {r['pairs_per_second']:.1f} | {r['ratio_to_peer']:.2f}x | {r['epoch_seconds']:.1f} | "
            f"{r['steps']} | {r['seconds_per_step']:.3f} | {r['pairs_per_step']:.1f} | {r['padding_share']:.1%} |"
        )
    verdict = "met" if record["ratio"] >= TARGET else "not met"
    lines += [
        "",
        f"Target: the shipped recipe >= {TARGET}x the peer's pairs per second: **{record['ratio']:.2f}x, {verdict}**.",
        "",
        f"Machine: {m['cpus']} CPUs ({m['platform']}), torch {m['torch']}, transformers {m['transformers']}, "
        f"{m['threads']} thread; load average before / after: {record['load_before']} / {record['load_after']}"
        f"{'; other long jobs paused while it ran' if record.get('quiet') else ''}.",
        "",
        f"Command: `{record['command']}`",
        "",
    ]
    return "\n".join(lines)


def write_summary(out: Path, record: dict) -> None:
    verdict = "met" if record["ratio"] >= TARGET else "not met"
    claims = [{"claim": CLAIM, "reading": f"{record['ratio']:.2f}x", "verdict": verdict, "p": None}]
    write_benchmark_summary(
        out,
        "translation-speed",
        "Training speed of the translation recipe against a same-size Hugging Face Marian model",
        "sse-stochastic-shared-embeddings.txt",
        claims,
        record["machine"],
        record["command"],
    )


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip().split("load average:")[-1].strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=12800, help="training pairs every arm trains one epoch over")
    parser.add_argument("--rounds", type=int, default=4, help="turns the arms take, a share of the epoch each")
    parser.add_argument("--quiet", action="store_true", help="record that other long jobs were paused during the run")
    parser.add_argument("--out", default=str(RESULTS), help="results folder (default: %(default)s)")
    parser.add_argument("--summary-only", action="store_true", help="rebuild README.md and summary.json from the JSON")
    args = parser.parse_args()
    out = Path(args.out)
    if args.summary_only:
        record = json.loads((out / "translation-speed.json").read_text())
    else:
        import transformers

        torch.manual_seed(0)
        torch.set_num_threads(1)
        before = _load()
        record = measure(args.pairs, args.rounds)
        record.update(
            rounds=args.rounds,
            quiet=args.quiet,
            load_before=before,
            load_after=_load(),
            command=f"python benchmarks/translation_speed.py --pairs {args.pairs} --rounds {args.rounds}"
            + (" --quiet" if args.quiet else ""),
            machine={
                "cpus": os.cpu_count(),
                "threads": 1,
                "platform": platform.platform(),
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            },
        )
        out.mkdir(parents=True, exist_ok=True)
        (out / "translation-speed.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["arms"], indent=2))
    (out / "README.md").write_text(markdown(record))
    write_summary(out, record)
    print(f"ratio {record['ratio']:.3f}; wrote {out}")


if __name__ == "__main__":
    main()
