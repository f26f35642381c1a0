"""An ``mlm`` run directory as a pretrained encoder: continued pre-training, then fine-tuning from it.

``model.pretrained`` of the encoder recipes (``encoder-classifier``, ``encoder-mlm``) takes, besides a registry
name and a Hugging Face checkpoint directory, the directory of a finished ``mlm`` run (one seed: ``.../seed-0`` of
a multi-seed run). Its encoder is the architecture the run started from (the run's own ``model.pretrained``, read
from its ``config.yaml``) with the weights of the run's ``best.safetensors`` (the ``encoder.`` entries of the
model), and the tokenizer is that architecture's. A continued ``encoder-mlm`` takes the run's MLM head as well
(:mod:`embreg.models.pretrained_mlm_head`); a fine-tuned classifier leaves it behind. A run of another task, an
unfinished or failed run, a run without ``best.safetensors`` (``train.keep_checkpoints`` dropped it) or a
checkpoint whose encoder does not fit the architecture is refused with a :class:`~embreg.errors.DataError` naming
the file and the misfit; safetensors files are loaded without running code (:mod:`embreg.runs.checkpoint`).

Example:
    >>> from pathlib import Path
    >>> is_run_directory(Path("no-such-dir"))
    False
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from embreg.errors import DataError

__all__ = [
    "is_run_directory",
    "run_architecture",
    "load_run_encoder",
    "run_head_weights",
    "run_encoder_source",
    "ENCODER_PREFIX",
]

ENCODER_PREFIX = "encoder."
"""Where the encoder's weights sit in an ``encoder-mlm`` model's state dict."""
PRETRAINING_TASK = "mlm"


def is_run_directory(path: Path) -> bool:
    """True for an embreg run directory (a ``config.yaml``, no Hugging Face ``config.json``)."""
    return path.is_dir() and (path / "config.yaml").is_file() and not (path / "config.json").is_file()


def _run_config(path: Path) -> dict[str, Any]:
    import yaml

    config_file = path / "config.yaml"
    try:
        config = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise DataError(f"{config_file}: not a readable run config ({exc})") from None
    if not isinstance(config, dict):
        raise DataError(f"{config_file}: not a run config (a mapping)")
    task = config.get("task")
    if task != PRETRAINING_TASK:
        raise DataError(
            f"{path} is a {task!r} run directory; model.pretrained takes an {PRETRAINING_TASK!r} run directory "
            "(continued pre-training), a registry name or a Hugging Face checkpoint directory"
        )
    model = config.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("pretrained"), str):
        raise DataError(f"{config_file}: model.pretrained is missing; cannot tell which architecture it trained")
    return config


def run_architecture(path: Path) -> str:
    """The ``model.pretrained`` an ``mlm`` run directory continued (its architecture and tokenizer).

    Raises:
        DataError: not an ``mlm`` run directory.
    """
    return str(_run_config(path)["model"]["pretrained"])


def _best_file(path: Path) -> Path:
    from embreg.runs.run_dir import BEST_CHECKPOINT

    best = path / BEST_CHECKPOINT
    if not best.is_file():
        seeds = sorted(p.name for p in path.glob("seed-*") if p.is_dir())
        hint = (
            f"; name one seed's directory, e.g. {path / seeds[0]}"
            if seeds
            else (" (run it with train.keep_checkpoints=best or all)")
        )
        raise DataError(f"{path} has no {BEST_CHECKPOINT}{hint}")
    return best


def _check_finished(path: Path) -> None:
    """Refuses an ``mlm`` run that is still training, was stopped before its end, or failed: its best epoch so far
    is not the encoder its recipe pre-trains (serving refuses such runs too, :mod:`embreg.serving.run_checks`)."""
    from embreg.runs.run_dir import RunDirectory, run_status

    status, error = run_status(RunDirectory(path))
    if status == "finished":
        return
    if status == "failed":
        what = f"failed ({error})" if error else "failed"
    else:
        what = "is unfinished (still training, or stopped before its end)"
    raise DataError(
        f"model.pretrained: the mlm run {path} {what}; it takes a finished run: finish this one with 'embreg run "
        "... --resume' into the same --out, or name another"
    )


def _finished_run(path: Path) -> tuple[dict[str, Any], Path]:
    """``(config, best checkpoint file)`` of a finished ``mlm`` run, each refusal a :class:`DataError`."""
    config = _run_config(path)
    best = _best_file(path)
    _check_finished(path)
    return config, best


def load_run_encoder(path: Path, load_architecture: Callable[[str], tuple[Any, Any]]) -> tuple[Any, Any]:
    """``(encoder, tokenizer)`` of an ``mlm`` run directory (see the module docstring).

    Args:
        path: the run directory.
        load_architecture: ``name -> (encoder, tokenizer)`` of the architecture the run continued (its
            ``model.pretrained``); :func:`embreg.models.pretrained.load_pretrained` passes itself.

    Raises:
        DataError: not an ``mlm`` run, no ``best.safetensors``, or its encoder does not fit the architecture
            (the first missing / unexpected key or differing shape is named).
    """
    from embreg.runs.checkpoint import load_checkpoint
    from embreg.runs.state_checks import check_model_state

    config, best = _finished_run(path)
    encoder, tokenizer = load_architecture(config["model"]["pretrained"])
    state = load_checkpoint(best)
    model_state = state.get("model") if isinstance(state, dict) else None
    if not isinstance(model_state, dict) or not any(str(k).startswith(ENCODER_PREFIX) for k in model_state):
        raise DataError(f"'{best}': no encoder weights ({ENCODER_PREFIX}*) in its model state")
    weights = {k[len(ENCODER_PREFIX) :]: v for k, v in model_state.items() if k.startswith(ENCODER_PREFIX)}
    source = f"'{best}' (encoder of {config['model']['pretrained']!r})"
    check_model_state(weights, encoder, source)
    encoder.load_state_dict(weights)
    return encoder.eval(), tokenizer


def run_head_weights(path: Path, prefix: str) -> dict[str, Any]:
    """The weights under ``prefix`` (e.g. the MLM head's ``head.``) in the ``best.safetensors`` of an ``mlm`` run
    directory, the prefix taken off.

    Raises:
        DataError: not an ``mlm`` run, no ``best.safetensors``, or no weights under ``prefix``.
    """
    from embreg.runs.checkpoint import load_checkpoint

    _, best = _finished_run(path)
    state = load_checkpoint(best).get("model")
    weights = {k[len(prefix) :]: v for k, v in (state or {}).items() if str(k).startswith(prefix)}
    if not weights:
        raise DataError(f"'{best}': no weights under {prefix!r} in its model state")
    return weights


def run_encoder_source(path: Path) -> str:
    """How a run's report names an encoder taken from the ``mlm`` run in ``path``.

    Example:
        >>> run_encoder_source(Path("runs/mlm"))  # doctest: +SKIP
        "mlm run 'runs/mlm' (best.safetensors of epoch 2, continued from 'all-minilm-l6-v2')"
    """
    from embreg.runs.checkpoint import load_checkpoint

    config, best = _finished_run(path)
    epoch = load_checkpoint(best).get("epoch")
    return (
        f"mlm run '{path.resolve()}' ({best.name} of epoch {epoch}, continued from {config['model']['pretrained']!r})"
    )
