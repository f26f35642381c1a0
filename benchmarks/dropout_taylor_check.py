"""Appendix A.2's check of the Taylor approximation: E[R_drop - R_approx] against E[R_drop] on a trained model.

For a model trained with dropout (a run directory of the ``lm-dropout`` recipe), on training windows:

* ``R_drop(x) = E_eta[l(F(x, eta))] - l(F(x))``, estimated with ``--draws`` fresh masks of the model's own dropout
  (locked on input/hidden/output, DropConnect on the hidden-to-hidden weights);
* ``R_approx(x)``: the quadratic Taylor term with the Gauss-Newton Hessian, ``q / (2(1-q))`` times eq. 4.4 (the factor
  App. A.1 drops), estimated by Alg. 3 with ``--samples`` label draws. ``structure=model`` uses the model's own mask
  sharing (what the dropout really does); ``structure=element`` treats every entry independently (eq. 4.4 as written).

    python benchmarks/dropout_taylor_check.py runs/dropout-regularizers/dropout1

Writes ``docs/results/dropout-regularizers-taylor.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch

from embreg.config import from_dict, load_yaml
from embreg.nn import dropout_disabled
from embreg.recipes.lm_builders import build_lm, build_lm_batches, load_corpus
from embreg.recipes.lm_schema import LMRecipeConfig
from embreg.regularizers.dropout import r_approx
from embreg.regularizers.dropout.sites import model_sites
from embreg.train.checkpoint import load_checkpoint
from embreg.train.trainer import BEST_CHECKPOINT

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--windows", type=int, default=20, help="training windows (B x bptt tokens each)")
    parser.add_argument("--draws", type=int, default=32, help="dropout masks per window for R_drop")
    parser.add_argument("--samples", type=int, default=16, help="label samples per window for R_approx")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    run = Path(args.run_dir)
    cfg = from_dict(LMRecipeConfig, load_yaml(run / "config.yaml"))
    corpus = load_corpus(cfg)
    model = build_lm(cfg, len(corpus.vocab))
    model.load_state_dict(load_checkpoint(run / BEST_CHECKPOINT)["model"])
    model.train()
    groups = cfg.dropout.per_site_group()
    torch.manual_seed(args.seed)
    totals = {"r_drop": 0.0, "r_approx_model": 0.0, "r_approx_element": 0.0}
    windows = 0
    state = None
    for batch in build_lm_batches(cfg, corpus).epoch(0):
        if windows >= args.windows:
            break
        with dropout_disabled(model):
            clean_out, next_state = model.forward_sequence(batch["input"], state)
            clean = model.loss(batch, clean_out).item()
        with torch.no_grad():
            dropped = sum(float(model.loss(batch, model.forward_sequence(batch["input"], state)[0]))
                          for _ in range(args.draws)) / args.draws
        totals["r_drop"] += dropped - clean
        for structure in ("model", "element"):
            sites = model_sites(model, batch, clean_out, structure)
            sites.pop("embedding")  # the input lookup is the 'input' site; no word-level dropout in this recipe
            coef = {n: (lambda q: q / (2 * (1 - q)))(groups[n.split(".")[0]]) for n in sites}
            value = r_approx(clean_out.predictions, sites, coef, samples=args.samples)
            totals[f"r_approx_{structure}"] += value.item()
        state = [(h.detach(), c.detach()) for h, c in next_state]
        windows += 1
    means = {k: v / windows for k, v in totals.items()}
    payload = {
        "command": f"python benchmarks/dropout_taylor_check.py {args.run_dir} --windows {args.windows} "
                   f"--draws {args.draws} --samples {args.samples} --seed {args.seed}",
        "best_epoch": json.loads((run / "metrics.json").read_text()).get("best_epoch"),
        "machine": f"{platform.machine()} CPU, torch {torch.__version__}, 1 thread",
        "checkpoint": str(run / BEST_CHECKPOINT), "windows": windows, "tokens_per_window": int(batch["input"].numel()),
        "E[R_drop]": means["r_drop"],
        "E[R_approx] (model sharing)": means["r_approx_model"],
        "E[R_approx] (element, eq. 4.4)": means["r_approx_element"],
        "E[R_drop - R_approx] (model sharing)": means["r_drop"] - means["r_approx_model"],
        "E[R_drop - R_approx] (element)": means["r_drop"] - means["r_approx_element"],
        "paper (PTB, q=0.5 hidden only)": {"E[R_drop]": 0.053, "E[R_drop - R_approx]": 0.009},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "dropout-regularizers-taylor.json").write_text(json.dumps(payload, indent=1) + "\n")
    print(json.dumps(payload, indent=1))


if __name__ == "__main__":
    main()
