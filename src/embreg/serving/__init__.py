"""Using a trained run: load its model with the original ids of its data, predict, recommend and score.

Example:
    >>> from embreg.serving import load  # doctest: +SKIP
    >>> run = load("runs/mf")  # doctest: +SKIP
    >>> run.predict("new_pairs.csv").table.head()  # doctest: +SKIP
"""

from embreg.serving.ensemble import Ensemble, load_ensemble
from embreg.serving.loading import load
from embreg.serving.trained_run import UNKNOWN_POLICIES, Prediction, TrainedRun
from embreg.serving.vocabulary import IdVocabulary

__all__ = ["load", "load_ensemble", "Ensemble", "TrainedRun", "Prediction", "IdVocabulary", "UNKNOWN_POLICIES"]
