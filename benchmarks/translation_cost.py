"""Cost of the translation family: SSE-SE on both vocabularies inside a training step, and beam search against
greedy decoding on the same model, each as a ratio measured in one run.

Targets: an SSE-SE step (p0 = 0.01 on source and target ids, recipe ``translation-sse``) costs <= 1.03x a plain
step (recipe ``translation``); beam search (beam 5, alpha 0.6) decodes a test batch in <= 3x the time of greedy
decoding on the same model. Beam search with the coverage penalty (beta 0.2) is reported beside them.

Steps: both recipes built as they train (batch 64, the CPU-sized Transformer), taking turns in interleaved rounds
(``embreg.demo.step_costs``). Decoding: the plain recipe's model is first trained for ``--train-steps`` steps (an
untrained model ends every sentence at once), then greedy and beam decoding of the same test batch take turns in
interleaved rounds; the median of each is compared. Both decoders run the translator incrementally (cached
self-attention keys and values of the prefix, cross-attention keys and values of the memory projected once per
source; :mod:`embreg.models.nmt_incremental`), only on the hypotheses still live; beam search computes one row per
source at its first step and stops a source once no live hypothesis can beat its best finished one (an exact bound:
the same output as without it). Both are also timed through the plain protocol (:class:`WholePrefix`: the decoder
re-run over the whole prefix at every step), for the cache's speed-up.

    python benchmarks/translation_cost.py --rounds 10 --steps 5 --decode-rounds 5 [--device cuda]

writes ``docs/results/translation-cost/translation-cost.json`` (``translation-cost-cuda.json`` on CUDA) and
``summary.json`` (the claims the results hub shows) in that folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from embreg.studies.hub import write_benchmark_summary

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "translation-cost"
SMALL_DATA = ["data.min_words=1", "data.max_train_pairs=4000", "data.max_eval_pairs=200"]
VARIANTS = {"plain step": ("translation", SMALL_DATA), "SSE-SE step (source + target)": ("translation-sse", SMALL_DATA)}
DECODERS = {  # label -> (beam, alpha, beta, cached)
    "greedy": (1, 0.0, 0.0, True),
    "beam 5": (5, 0.6, 0.0, True),
    "beam 5 + coverage": (5, 0.6, 0.2, True),
    "greedy, uncached": (1, 0.0, 0.0, False),
    "beam 5, uncached": (5, 0.6, 0.0, False),
}
CLAIMS = {
    "sse": ("An SSE-SE training step on source and target ids costs <= 1.03x a plain Transformer step", 1.03),
    "beam": ("Beam search (beam 5) decodes a test batch in <= 3x the time of greedy decoding", 3.0),
}


def step_ratio(rounds: int, steps: int, device: str) -> dict:
    from embreg.demo import step_costs

    variants = {k: (r, [*o, f"train.device={device}"]) for k, (r, o) in VARIANTS.items()}
    seconds = step_costs(variants, rounds=rounds, steps=steps)
    labels = list(VARIANTS)
    return {
        "median_ms_per_step": {k: v * 64 * 1e3 for k, v in seconds.items()},
        "ratio": seconds[labels[1]] / seconds[labels[0]],
    }


class WholePrefix:
    """The translator seen through the plain :class:`~embreg.nn.decoding.EncoderDecoder` protocol only (no
    incremental extension): every step re-runs the decoder over the whole prefix, as decoding without a cache does."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.bos_id, self.eos_id, self.pad_id = model.bos_id, model.eos_id, model.pad_id

    def encode(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.encode(source)

    def decode_step(self, prefix, memory, source_padding):  # noqa: ANN001, ANN201 - the protocol's signature
        return self.model.decode_step(prefix, memory, source_padding)


def decode_ratio(train_steps: int, rounds: int, batch: int, device: str) -> dict:
    from embreg.batching.batches import endless_batches
    from embreg.nn.decoding import beam_search, greedy_decode
    from embreg.recipes import load_recipe
    from embreg.recipes.run import build_run

    recipe = load_recipe("translation", [*SMALL_DATA, "train.progress=false", f"train.device={device}"])
    built = build_run(recipe)
    trainer = built.trainer(None)
    trainer.model.train()
    batches = endless_batches(built.batches)
    for _ in range(train_steps):
        trainer._train_step(next(batches), 0)  # noqa: SLF001 - the trainer's own step
    model = trainer.model.eval()
    source = built.prepared.tensors["test"]["source"][:batch]
    source = source[:, : int((source != 0).sum(dim=1).max())].to(trainer.device)
    max_len = recipe.data.max_tokens + 1
    timings: dict[str, list[float]] = {label: [] for label in DECODERS}
    lengths: dict[str, float] = {}
    for round_index in range(rounds + 1):
        for label, (beam, alpha, beta, cached) in DECODERS.items():
            decoder = model if cached else WholePrefix(model)
            if trainer.device.type == "cuda":
                torch.cuda.synchronize()
            began = time.perf_counter()
            if beam == 1:
                out = greedy_decode(decoder, source, max_len)
            else:
                out = beam_search(decoder, source, max_len, beam, alpha, beta)
            if trainer.device.type == "cuda":
                torch.cuda.synchronize()
            if round_index:  # round 0 warms up
                timings[label].append(time.perf_counter() - began)
            lengths[label] = sum(len(t) for t in out.tokens) / len(out.tokens)
    median = {label: statistics.median(values) for label, values in timings.items()}
    return {
        "batch": int(source.shape[0]),
        "train_steps": train_steps,
        "median_ms_per_batch": {k: v * 1e3 for k, v in median.items()},
        "mean_output_tokens": lengths,
        "ratio": median["beam 5"] / median["greedy"],
        "ratio_coverage": median["beam 5 + coverage"] / median["greedy"],
        "cache_speedup_greedy": median["greedy, uncached"] / median["greedy"],
        "cache_speedup_beam": median["beam 5, uncached"] / median["beam 5"],
        "ratio_uncached": median["beam 5, uncached"] / median["greedy, uncached"],
    }


def write_summary(out: Path, record: dict) -> None:
    """``summary.json`` from a ``translation-cost.json`` record."""
    readings = {"sse": record["steps"]["ratio"], "beam": record["decoding"]["ratio"]}
    claims = [
        {
            "claim": claim,
            "reading": f"{readings[key]:.3f}x",
            "verdict": "met" if readings[key] <= target else "not met",
            "p": None,
        }
        for key, (claim, target) in CLAIMS.items()
    ]
    write_benchmark_summary(
        out,
        "translation-cost",
        "Cost of SSE-SE in a Transformer translation step, and of beam search against greedy decoding",
        "sse-stochastic-shared-embeddings.txt",
        claims,
        record["machine"],
        record["command"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds of training steps")
    parser.add_argument("--steps", type=int, default=5, help="steps per variant per round")
    parser.add_argument("--train-steps", type=int, default=300, help="steps trained before timing the decoders")
    parser.add_argument("--decode-rounds", type=int, default=5, help="interleaved rounds of decoding")
    parser.add_argument("--batch", type=int, default=64, help="test sentences decoded together")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--out", default=str(RESULTS), help="results folder (default: %(default)s)")
    parser.add_argument("--summary-only", action="store_true", help="rebuild summary.json from the stored record")
    args = parser.parse_args()
    out = Path(args.out)
    name = "translation-cost.json" if args.device == "cpu" else f"translation-cost-{args.device.split(':')[0]}.json"
    if args.summary_only:
        write_summary(out, json.loads((out / "translation-cost.json").read_text()))
        return
    torch.manual_seed(0)
    threads = 1 if args.device == "cpu" else torch.get_num_threads()
    torch.set_num_threads(threads)
    steps = step_ratio(args.rounds, args.steps, args.device)
    decoding = decode_ratio(args.train_steps, args.decode_rounds, args.batch, args.device)
    machine = {"cpus": os.cpu_count(), "threads": threads, "platform": platform.platform(), "torch": torch.__version__}
    if args.device != "cpu" and torch.cuda.is_available():
        machine["gpu"] = torch.cuda.get_device_name(0)
    record = {
        "command": (
            f"python benchmarks/translation_cost.py --rounds {args.rounds} --steps {args.steps} --train-steps "
            f"{args.train_steps} --decode-rounds {args.decode_rounds} --batch {args.batch} --device {args.device}"
        ),
        "machine": machine,
        "steps": steps,
        "decoding": decoding,
    }
    print(json.dumps(record, indent=2))
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(json.dumps(record, indent=2) + "\n")
    if args.device == "cpu":
        write_summary(out, record)
    print(f"wrote {out / name}")


if __name__ == "__main__":
    main()
