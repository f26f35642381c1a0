"""Noise attenuation through all-MiniLM-L6-v2 before and after fine-tuning (lnsr-noise-stability-bert.txt, Fig. 1).

For the pretrained encoder and for fine-tuned models (``best.safetensors`` of run directories made with
``--set train.keep_checkpoints=best``), Gaussian noise of 5% of a layer's output norm is injected at each layer in
turn and the relative change is measured at every later layer, on test reviews (evaluation mode).

    python benchmarks/finetune_noise_attenuation.py --run FT=runs/ft-stability/ft-reviews/seed-0 \\
        --run LNSR=runs/ft-stability/ft-reviews-lnsr/seed-0 --examples 64 --threads 1

writes ``docs/results/finetuning-noise-attenuation/finetuning-stability-attenuation.{json,png}`` and rebuilds that
folder's ``summary.json`` (``--out-dir``: another folder).
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import torch

from embreg.analysis.noise_attenuation import noise_attenuation, plot_attenuation, save_attenuation
from embreg.data.datasets.reviews import load_reviews
from embreg.models import EncoderClassifier, encode_texts
from embreg.runs.checkpoint import load_checkpoint
from embreg.studies.hub import write_benchmark_summary
from embreg.train.trainer import BEST_CHECKPOINT

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "finetuning-noise-attenuation"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="a fine-tuned run directory holding best.safetensors (repeatable)",
    )
    parser.add_argument("--examples", type=int, default=64, help="test reviews to average over")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--ratio", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out-dir", type=Path, default=OUT, help="output folder (default: %(default)s)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tokenizer = EncoderClassifier.from_pretrained("all-minilm-l6-v2", 2)
    task = load_reviews("binary", train_size=1000, valid_size=500, test_size=1000)
    batch = encode_texts(tokenizer, task.texts["test"][: args.examples], args.max_length)
    curves = {"pretrained": noise_attenuation(model, batch, ratio=args.ratio, repeats=args.repeats)}
    for spec in args.run:
        name, _, directory = spec.partition("=")
        state = load_checkpoint(Path(directory) / BEST_CHECKPOINT)["model"]
        model.load_state_dict(state)
        curves[f"fine-tuned: {name}"] = noise_attenuation(model, batch, ratio=args.ratio, repeats=args.repeats)
    command = "python benchmarks/finetune_noise_attenuation.py " + " ".join(sys.argv[1:])
    machine = f"{platform.machine()}, {torch.get_num_threads()} torch thread(s)"
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    save_attenuation(
        curves,
        out / "finetuning-stability-attenuation.json",
        command=command,
        machine=machine,
        ratio=args.ratio,
        examples=args.examples,
        max_length=args.max_length,
        repeats=args.repeats,
    )
    plot_attenuation(
        curves,
        out / "finetuning-stability-attenuation.png",
        title=f"all-MiniLM-L6-v2, {args.examples} test reviews: noise of {args.ratio:.0%} of a layer's "
        "output norm, relative change at later layers",
    )
    # a figure to read, no claim with a verdict
    write_benchmark_summary(
        out,
        "finetuning-noise-attenuation",
        "Noise attenuation through MiniLM (LNSR paper Fig. 1)",
        "lnsr-noise-stability-bert.txt",
        [],
        {"description": machine},
        command,
    )
    for name, c in curves.items():
        print(name)
        for i, values in c.items():
            print(f"  noise at {i}: " + " ".join(f"{v:.3f}" for v in values))


if __name__ == "__main__":
    main()
