"""Step-time and memory cost of the dropout techniques relative to a Dropout_1 step, measured in one run.

Every technique trains the same LSTM LM on the same random batch; steps are interleaved round-robin (one step of each
technique per round) so that load from other processes on a shared machine hits all of them alike; the fastest and
the median step over rounds are reported. Memory is the total size of the tensors autograd saves for backward in one step (distinct
storages), the part that grows with the technique; it is measured with ``torch.autograd.graph.saved_tensors_hooks``.

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/dropout_cost.py --rounds 12   # the CPU-sized experiment model
    nice -n 15 python benchmarks/dropout_cost.py --layers 2 --hidden 400 --vocab 10000

Writes ``docs/results/dropout-regularizers-cost.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from embreg.recipes.lm_builders import build_lm, build_update_rule
from embreg.recipes.lm_run import load_lm_recipe
from embreg.regularizers.base import StepContext

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
TECHNIQUES = [
    ("Dropout_1", ["technique.name=standard"]),
    ("Dropout_2", ["technique.name=dropout_k", "technique.k=2"]),
    ("Dropout_4", ["technique.name=dropout_k", "technique.k=4"]),
    ("Dropout_8", ["technique.name=dropout_k", "technique.k=8"]),
    ("R_approx", ["technique.name=explicit"]),
    ("R_approx + xi (Alg. 2)", ["technique.name=explicit_xi"]),
    ("Dropout_4 + xi (Alg. 4)", ["technique.name=dropout_k_xi", "technique.k=4"]),
    ("identity Hessian", ["technique.name=explicit", "technique.form=identity"]),
    ("R~_approx (loss Jacobian)", ["technique.name=explicit", "technique.form=loss_jacobian"]),
    ("no dropout", ["dropout.input=0", "dropout.hidden=0", "dropout.output=0", "dropout.weight=0"]),
    ("R_approx, textbook autograd form", ["technique.name=explicit", "+textbook"]),
    ("R_approx + xi, textbook autograd form", ["technique.name=explicit_xi", "+textbook"]),
]
"""``+textbook``: the same estimators computed the direct way (the implementation before the speed-ups), for comparison
in the same run: multinomial labels, the cross-entropy differentiated twice, the fused LSTM (see TextbookExplicit)."""


class TextbookExplicit:
    """R_approx (eq. 4.4, Alg. 3) the direct way: labels by ``torch.multinomial``, the sampled cross-entropy
    differentiated with ``create_graph`` (so its backward is differentiated again). Same estimator as
    :class:`ExplicitDropoutRegularizer`, which forms ``softmax - onehot`` directly and samples by inversion."""

    def __init__(self, reg) -> None:
        self.reg = reg

    def penalty(self, ctx):
        from embreg.regularizers.dropout.clean_pass import clean_pass
        from embreg.regularizers.dropout.functional import mask_gradients, summed_cross_entropy
        from embreg.regularizers.dropout.sites import model_sites, per_site, resolve_names

        output, _ = clean_pass(ctx)
        sites = model_sites(ctx.model, ctx.batch, output, self.reg.structure)
        coefficients = per_site(self.reg.coefficients, resolve_names(sites, self.reg.sites))
        logits = output.predictions
        rows = logits.detach().reshape(-1, logits.shape[-1])
        labels = torch.multinomial(torch.softmax(rows, -1), 1).reshape(logits.shape[:-1])
        grads = mask_gradients(summed_cross_entropy(logits, labels), [sites[n] for n in coefficients])
        return sum(c * g.pow(2).sum() for c, g in zip(coefficients.values(), grads)) / rows.shape[0]


def textbook(model, rule) -> None:
    """Switches ``rule`` and ``model`` to the textbook computations (xi through the loss's backward graph)."""
    from embreg.regularizers.dropout import ExplicitDropoutRegularizer

    model.loss_is_mean_cross_entropy = False  # ImplicitDropoutNoise then differentiates the loss itself
    model.unroll = False  # the fused LSTM kernel, whose create-graph backward recomputes the forward pass
    rule.regularizers = [TextbookExplicit(r) if isinstance(r, ExplicitDropoutRegularizer) else r
                         for r in rule.regularizers]


class SavedBytes:
    """Counts the bytes of distinct storages autograd saves for backward while active."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.bytes = 0

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        key = t.untyped_storage().data_ptr()
        if key not in self.seen:
            self.seen.add(key)
            self.bytes += t.untyped_storage().nbytes()
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


def make_step(overrides: list[str], args):
    sizes = [f"model.layers={args.layers}", f"model.hidden_dim={args.hidden}", f"model.emb_dim={args.emb}"]
    flags = [o for o in overrides if o.startswith("+")]
    cfg = load_lm_recipe("lm-dropout", sizes + [o for o in overrides if not o.startswith("+")])
    torch.manual_seed(0)
    model = build_lm(cfg, args.vocab)
    rule = build_update_rule(cfg)
    if "+textbook" in flags:
        textbook(model, rule)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    batch = {"input": torch.randint(0, args.vocab, (args.batch, args.bptt), generator=g),
             "target": torch.randint(0, args.vocab, (args.batch, args.bptt), generator=g)}

    def step(counter: SavedBytes | None = None) -> float:
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if counter is None:
            loss, out = rule.objective(model, batch)
            ctx = StepContext(model, batch, out, loss)
            total = loss + sum((r.penalty(ctx) for r in rule.regularizers), torch.zeros(()))
        else:
            with counter.hooks():
                loss, out = rule.objective(model, batch)
                ctx = StepContext(model, batch, out, loss)
                total = loss + sum((r.penalty(ctx) for r in rule.regularizers), torch.zeros(()))
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.35)
        opt.step()
        return time.perf_counter() - start

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=200)
    parser.add_argument("--emb", type=int, default=200)
    parser.add_argument("--vocab", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--bptt", type=int, default=35)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tag", default="")
    parser.add_argument("--host-note", default="shared 2-core host under load from other jobs",
                        help="how busy the machine was (recorded with the results)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps = {name: make_step(overrides, args) for name, overrides in TECHNIQUES}
    memory = {}
    for name, step in steps.items():
        step()  # warm-up
        counter = SavedBytes()
        step(counter)
        memory[name] = counter.bytes / 2**20
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            times[name].append(step())
    base = statistics.median(times["Dropout_1"])
    fastest = min(times["Dropout_1"])
    rows = [{"technique": name, "median_ms": 1000 * statistics.median(t), "ratio": statistics.median(t) / base,
             "min_ms": 1000 * min(t), "ratio_min": min(t) / fastest,
             "ratio_rounds": statistics.median(a / b for a, b in zip(t, times["Dropout_1"])),
             "saved_mb": memory[name], "times_s": t}
            for name, t in times.items()]
    threads_env = os.environ.get("OMP_NUM_THREADS")
    command = ((f"OMP_NUM_THREADS={threads_env} " if threads_env else "") + "python benchmarks/dropout_cost.py "
               + " ".join(shlex.quote(a) for a in sys.argv[1:])).strip()
    machine = f"{platform.machine()} CPU ({platform.processor() or 'unknown'}), torch {torch.__version__}, " \
              f"{args.threads} thread(s), {args.host_note}"
    payload = {"command": command, "machine": machine, "rows": rows, "args": vars(args)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    suffix = f"-{args.tag}" if args.tag else ""
    (RESULTS / f"dropout-regularizers-cost{suffix}.json").write_text(json.dumps(payload, indent=1) + "\n")
    lines = [f"Command: `{command}`", "", f"Machine: {machine}", "",
             f"Model: {args.layers}-layer LSTM, emb {args.emb}, hidden {args.hidden}, vocab {args.vocab}, "
             f"batch {args.batch} x bptt {args.bptt}; {args.rounds} interleaved steps each. On a loaded host the "
             "fastest step (least disturbed) is the better estimate of the intrinsic cost; the median is shown too, "
             "and the median over rounds of the ratio to that round's Dropout_1 step (steps close in time share "
             "the load).",
             "", "| technique | fastest step (ms) | x Dropout_1 (fastest) | median step (ms) | x Dropout_1 (median) "
             "| x Dropout_1 (median per round) | saved for backward (MiB) | x Dropout_1 |",
             "|---|---|---|---|---|---|---|---|"]
    base_mb = memory["Dropout_1"]
    lines += [f"| {r['technique']} | {r['min_ms']:.0f} | {r['ratio_min']:.2f} | {r['median_ms']:.0f} | "
              f"{r['ratio']:.2f} | {r['ratio_rounds']:.2f} | {r['saved_mb']:.1f} | {r['saved_mb'] / base_mb:.2f} |"
              for r in rows]
    (RESULTS / f"dropout-regularizers-cost{suffix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
