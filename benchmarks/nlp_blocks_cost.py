"""Cost per training step of the NLP building blocks beside the plain model's, measured in one run.

Groups, each with its own plain reference (ratios are within a group):

* ``lstm-lm``: the LSTM language model (3 layers) plain, with each ``connections`` setting, with a learned initial
  state and with a down-projection; a step is forward, loss, backward and an Adam step on random tokens.
* ``ncf`` and ``dlrm``: the models with each MLP ``connections`` setting (random ids and ratings / clicks).
* ``attention``: each attention block on one fixed batch (forward, backward to its inputs and parameters, an Adam
  step), beside mean pooling over the keys (no attention) as the plain reference.

The variants of a group take turns step by step, the order rotating every round, so drifts in machine load hit
them alike; every step is timed on its own and the ratio of median step times is reported.

    python benchmarks/nlp_blocks_cost.py --threads 1 --rounds 20 --steps 5

writes ``docs/results/nlp-blocks-cost/nlp-blocks-cost.json``, the page ``README.md`` and ``summary.json`` there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from embreg.models import DLRM, NCF
from embreg.models.lstm_lm import LSTMLanguageModel
from embreg.nn.attention import (
    AdditiveAttention,
    KeyValueAttention,
    MultiplicativeAttention,
    ScaledDotProductAttention,
)
from embreg.studies.hub import write_benchmark_summary

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "nlp-blocks-cost"
CONNECTIONS = ("residual", "highway", "dense")
Step = Callable[[], None]


def _trainer(model: nn.Module, forward: Callable[[], torch.Tensor]) -> Step:
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=1e-3) if params else None

    def step() -> None:
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        forward().backward()
        if optimizer is not None:
            optimizer.step()

    return step


def lstm_steps(batch: int, bptt: int) -> dict[str, Step]:
    """The LSTM LM (vocabulary 2,000, 64-d embeddings, 3 layers of 64 units, dropout 0.2)."""
    tokens = torch.randint(0, 2000, (batch, bptt + 1))
    data = {"input": tokens[:, :-1], "target": tokens[:, 1:]}
    variants: dict[str, dict] = {
        "plain": {},
        **{f"connections={kind}": {"connections": kind} for kind in CONNECTIONS},
        "learn_init": {"learn_init": True},
        "down-projection (64 -> 64)": {"proj_dim": 64},
    }
    steps = {}
    for name, kwargs in variants.items():
        torch.manual_seed(0)
        model = LSTMLanguageModel.build(2000, 64, 64, 3, q_input=0.2, q_hidden=0.2, q_output=0.2, **kwargs).train()
        steps[name] = _trainer(model, lambda model=model: model.loss(data, model(data)))
    return steps


def ncf_steps(batch: int) -> dict[str, Step]:
    """NCF (1,000 users and items, d = 64, MLP 128-128-32)."""
    data = {
        "user": torch.randint(0, 1000, (batch,)),
        "item": torch.randint(0, 1000, (batch,)),
        "rating": torch.rand(batch) * 4 + 1,
    }
    steps = {}
    for kind in ("none", *CONNECTIONS):
        torch.manual_seed(0)
        model = NCF(nn.Embedding(1000, 64), nn.Embedding(1000, 64), connections=kind).train()
        steps["plain" if kind == "none" else f"connections={kind}"] = _trainer(
            model, lambda model=model: model.loss(data, model(data))
        )
    return steps


def dlrm_steps(batch: int) -> dict[str, Step]:
    """DLRM (8 fields of 1,000 ids, d = 16, 6 dense features, bottom MLP 64, top MLP 64-32)."""
    data = {
        "categorical": torch.randint(0, 1000, (batch, 8)),
        "dense": torch.randn(batch, 6),
        "label": torch.randint(0, 2, (batch,)).float(),
    }
    steps = {}
    for kind in ("none", *CONNECTIONS):
        torch.manual_seed(0)
        model = DLRM([nn.Embedding(1000, 16) for _ in range(8)], num_dense=6, connections=kind).train()
        steps["plain" if kind == "none" else f"connections={kind}"] = _trainer(
            model, lambda model=model: model.loss(data, model(data))
        )
    return steps


def attention_steps(batch: int, queries: int, keys: int, dim: int, window: int) -> dict[str, Step]:
    """Each attention block on one batch: queries ``(B, Lq, D)``, keys = values ``(B, Lk, D)``."""
    torch.manual_seed(0)
    query = torch.randn(batch, queries, dim, requires_grad=True)
    memory = torch.randn(batch, keys, dim, requires_grad=True)
    mask = torch.ones(batch, keys, dtype=torch.bool)
    mask[: batch // 2, keys * 3 // 4 :] = False  # half the batch padded
    coverage = torch.rand(batch, queries, keys)
    hidden = torch.randn(batch, keys, 2 * dim, requires_grad=True)
    modules: dict[str, tuple[nn.Module, Callable[[nn.Module], torch.Tensor]]] = {
        "plain (mean over keys)": (nn.Identity(), lambda m: memory.mean(1, keepdim=True).expand_as(query).sum()),
        "dot": (MultiplicativeAttention(dim, dim, score="dot"), lambda m: m(query, memory, mask=mask)[0].sum()),
        "general (bilinear)": (MultiplicativeAttention(dim, dim), lambda m: m(query, memory, mask=mask)[0].sum()),
        "scaled dot-product": (ScaledDotProductAttention(), lambda m: m(query, memory, mask=mask)[0].sum()),
        "additive": (AdditiveAttention(dim, dim, dim), lambda m: m(query, memory, mask=mask)[0].sum()),
        "additive + coverage": (
            AdditiveAttention(dim, dim, dim, coverage=True),
            lambda m: m(query, memory, mask=mask, coverage=coverage)[0].sum(),
        ),
        f"key-value (window {window})": (
            KeyValueAttention(dim, dim, dim, window),
            lambda m: m(hidden, mask=mask)[0].sum(),
        ),
    }
    steps = {}
    for name, (module, forward) in modules.items():
        inner = _trainer(module, lambda module=module, forward=forward: forward(module))

        def step(inner: Step = inner) -> None:
            for tensor in (query, memory, hidden):
                tensor.grad = None
            inner()

        steps[name] = step
    return steps


def time_group(steps: dict[str, Step], rounds: int, per_round: int) -> dict[str, float]:
    """Median seconds per step of each variant, the variants interleaved step by step."""
    for step in steps.values():  # warm-up
        for _ in range(3):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for _ in range(per_round):
            for name in order:
                started = time.perf_counter()
                steps[name]()
                times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def write_page(folder: Path, result: dict) -> None:
    lines = [
        "# Cost per training step of the NLP building blocks",
        "",
        "Each block's median time per training step (forward, loss, backward, Adam step) beside its group's plain "
        "model, all variants of a group interleaved step by step in one run (`benchmarks/nlp_blocks_cost.py`). "
        "Ratios compare variants within a group only. On the shared 2-core machine, repeated runs moved the "
        "LSTM LM's and the MLPs' ratios by up to about 0.15 (e.g. `learn_init` read 0.98 to 1.12 though it adds "
        "no work per step): smaller differences are noise.",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Machine: {result['machine']['platform']}, {result['machine']['cpus']} CPUs (shared), "
        f"{result['machine']['threads']} thread(s), torch {result['machine']['torch']}.",
        "",
    ]
    for group, details in result["groups"].items():
        lines += [f"## {group}", "", details["setup"], "", "| variant | median step (ms) | step / plain step |"]
        lines.append("|---|---|---|")
        for name, ms in details["median_step_ms"].items():
            lines.append(f"| {name} | {ms:.3f} | {details['ratio_vs_plain'][name]:.2f} |")
        lines.append("")
    (folder / "README.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds per group")
    parser.add_argument("--steps", type=int, default=5, help="steps per variant per round")
    parser.add_argument("--lm-batch", type=int, default=16)
    parser.add_argument("--bptt", type=int, default=35)
    parser.add_argument("--rec-batch", type=int, default=1024, help="batch of NCF and DLRM")
    parser.add_argument("--attn-batch", type=int, default=32)
    parser.add_argument("--out-dir", default=str(RESULTS), help="where the JSON record and the page go")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    groups = {
        "lstm-lm": (
            lstm_steps(args.lm_batch, args.bptt),
            f"LSTM LM, vocabulary 2,000, 64-d tied embeddings, 3 layers of 64 units, locked dropout 0.2, batch "
            f"{args.lm_batch} x {args.bptt} tokens.",
        ),
        "ncf": (
            ncf_steps(args.rec_batch),
            f"NCF, 1,000 users and items, d = 64, MLP 128-128-32, batch {args.rec_batch}.",
        ),
        "dlrm": (
            dlrm_steps(args.rec_batch),
            f"DLRM, 8 fields of 1,000 ids, d = 16, 6 dense features, bottom MLP 64, top MLP 64-32, batch "
            f"{args.rec_batch}.",
        ),
        "attention": (
            attention_steps(args.attn_batch, 20, 30, 64, 5),
            f"Attention blocks, batch {args.attn_batch}, 20 queries over 30 keys of width 64 (half the batch padded "
            "from key 23), key-value attention over 30 positions of width 64 + 64 with a window of 5. The plain "
            "reference averages the keys and costs almost nothing, so read the attention blocks by their times: "
            "the multiplicative scores are one batched matrix product, the additive ones a (B, Lq, Lk, A) tanh "
            "layer.",
        ),
    }
    result: dict = {
        "command": "python benchmarks/nlp_blocks_cost.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out_dir"),
        "machine": {
            "cpus": os.cpu_count(),
            "threads": args.threads,
            "platform": platform.platform(),
            "torch": torch.__version__,
        },
        "groups": {},
    }
    for group, (steps, setup) in groups.items():
        median = time_group(steps, args.rounds, args.steps)
        plain = next(v for k, v in median.items() if k.startswith("plain"))
        result["groups"][group] = {
            "setup": setup,
            "median_step_ms": {k: v * 1e3 for k, v in median.items()},
            "ratio_vs_plain": {k: v / plain for k, v in median.items()},
        }
        print(group, {k: round(v / plain, 2) for k, v in median.items()}, flush=True)
    folder = Path(args.out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nlp-blocks-cost.json").write_text(json.dumps(result, indent=2) + "\n")
    write_page(folder, result)
    claims = [
        {
            "claim": f"Each block's cost per training step beside the plain model's ({group})",
            "reading": ", ".join(
                f"{k} {v:.2f}x" for k, v in details["ratio_vs_plain"].items() if not k.startswith("plain")
            ),
            "verdict": "met",
            "p": None,
        }
        for group, details in result["groups"].items()
    ]
    write_benchmark_summary(
        folder,
        "nlp-blocks-cost",
        "Cost per training step of the NLP building blocks",
        "nlp-best-practices.txt",
        claims,
        result["machine"],
        result["command"],
    )
    print(f"wrote {folder}")


if __name__ == "__main__":
    main()
