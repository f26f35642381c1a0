"""The tiny study the tests of embreg.studies share."""

from __future__ import annotations

from pathlib import Path

TINY = """\
name: tiny
title: Tiny MF study
paper: sse-stochastic-shared-embeddings.txt
dataset: MovieLens-100k, first 2000 ratings
description: MF against MF with dropout, tuned over the L2 weight.
variants:
  MF: {recipe: mf}
  MF-dropout: {recipe: mf, set: [model.dropout=0.2]}
common: [data.max_rows=2000, train.epochs=2, train.progress=false, train.threads=1]
tune:
  method: grid
  space: {model.l2: [0.0, 0.05]}
  seeds: 1
seeds: 2
metrics: [test_rmse, test_mae]
claims:
  - {text: "dropout improves MF (Table 1)", metric: test_rmse, variant: MF-dropout}
notes: ["two epochs only: a test of the machinery, not a reading"]
"""


def write_study(folder: Path, text: str = TINY, name: str = "tiny") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path
