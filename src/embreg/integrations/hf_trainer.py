"""Hugging Face ``Trainer`` adapter: the same regulariser objects as in embreg's own loop, inside ``Trainer``.

:class:`RegularizedTrainer` is ``transformers.Trainer`` with a ``regularizers=[...]`` argument. It calls each
regulariser's hooks at the same points as :class:`embreg.train.trainer.Trainer`:

* ``prepare(model)`` once, in ``__init__``, before the optimizer exists (Mixout swaps layers here);
* ``penalty(ctx)`` on every training forward: the model runs with ``output_hidden_states=True`` and the
  :class:`~embreg.regularizers.base.StepContext` carries its logits and hidden states, so LNSR, R3F and SMART
  find the clean states and rerun the layers through the model's layer stack;
* ``after_backward(ctx)`` after each backward pass, before the Trainer clips gradients and steps.

:func:`regularized_loss` is the same thing as a function, for a hand-written loop around a Hugging Face model.

Models: Hugging Face ``*ForSequenceClassification`` models (BERT family), or embreg-protocol models
(``model(batch) -> ModelOutput`` and ``model.loss(batch, output)``, e.g. :class:`~embreg.models.EncoderClassifier`);
for those the Trainer is told to keep every input column.

Example:
    >>> from transformers import BertConfig, BertForSequenceClassification, TrainingArguments  # doctest: +SKIP
    >>> from embreg.regularizers import LNSR  # doctest: +SKIP
    >>> trainer = RegularizedTrainer(model=model, args=TrainingArguments("out", max_steps=10),  # doctest: +SKIP
    ...                              train_dataset=data, regularizers=[LNSR(sigma=0.1)])
    >>> trainer.train()  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn
from transformers import PreTrainedModel, Trainer

from embreg.models.hidden_states import hidden_states_dict
from embreg.models.output import ModelOutput
from embreg.regularizers.base import StepContext

if TYPE_CHECKING:
    from embreg.models.protocols import LossModel

__all__ = ["RegularizedTrainer", "regularized_loss", "is_embreg_model"]


def is_embreg_model(model: nn.Module) -> bool:
    """Whether ``model`` follows embreg's protocol (``model(batch)``, ``model.loss``) rather than Hugging Face's."""
    return not isinstance(model, PreTrainedModel) and callable(getattr(model, "loss", None))


def _hf_predictions(logits: torch.Tensor) -> torch.Tensor:
    return logits.squeeze(-1) if logits.dim() == 2 and logits.shape[-1] == 1 else logits


def _context(model: nn.Module, inputs: dict[str, Any], outputs: Any, loss: torch.Tensor, step: int) -> StepContext:
    if isinstance(outputs, ModelOutput):
        return StepContext(model=model, batch=inputs, output=outputs, loss=loss, step=step)
    states = getattr(outputs, "hidden_states", None)
    output = ModelOutput(_hf_predictions(outputs.logits), hidden_states_dict(states) if states is not None else {})
    model_inputs = {k: v for k, v in inputs.items() if k != "output_hidden_states"}
    predict = lambda m: _hf_predictions(m(**model_inputs).logits)  # noqa: E731 (SMART's Bregman anchor pass)
    return StepContext(model=model, batch=inputs, output=output, loss=loss, step=step, extras={"predict": predict})


def regularized_loss(
    model: nn.Module, inputs: dict[str, Any], regularizers: Sequence[Any], *, step: int = 0
) -> tuple[torch.Tensor, Any, torch.Tensor]:
    """The task loss plus every regulariser's penalty for one batch: ``(total, outputs, penalty)``.

    Args:
        model: a Hugging Face model taking ``**inputs`` (with ``labels``), or an embreg-protocol model.
        inputs: the batch; the Hugging Face model gets ``output_hidden_states=True`` added in training mode.
        regularizers: objects with any of the protocol hooks (only ``penalty`` is called here).
        step: the optimisation step, passed on in the context.

    Example:
        >>> total, outputs, penalty = regularized_loss(model, batch, [R3F(weight=1.0)])  # doctest: +SKIP
        >>> total.backward()  # doctest: +SKIP
    """
    wants_states = model.training and any(hasattr(r, "penalty") for r in regularizers)
    if is_embreg_model(model):
        outputs = model(inputs)
        loss = cast("LossModel", model).loss(inputs, outputs)
    else:
        outputs = model(**inputs, output_hidden_states=True) if wants_states else model(**inputs)
        loss = outputs.loss
        if loss is None:
            raise ValueError("the model returned no loss; pass 'labels' in the inputs")
    penalty = loss.new_zeros(())
    if wants_states:
        ctx = _context(model, inputs, outputs, loss, step)
        for regularizer in regularizers:
            if hasattr(regularizer, "penalty"):
                penalty = penalty + regularizer.penalty(ctx)
    return loss + penalty, outputs, penalty


class RegularizedTrainer(Trainer):
    """``transformers.Trainer`` whose loss adds embreg regularisers' penalties (see the module docstring).

    Args:
        *args, **kwargs: as for ``transformers.Trainer``.
        regularizers: objects with any of ``prepare``, ``penalty``, ``after_backward``.

    Attributes:
        last_penalty: the summed penalty of the last training micro-batch (a float, for logging and tests).
    """

    def __init__(self, *args: Any, regularizers: Sequence[Any] = (), **kwargs: Any) -> None:
        self.regularizers = list(regularizers)
        self.last_penalty = 0.0
        model = kwargs.pop("model", None)
        if model is None and args:
            model, args = args[0], args[1:]
        if model is not None:
            for regularizer in self.regularizers:
                if hasattr(regularizer, "prepare"):
                    model = regularizer.prepare(model)
        super().__init__(model, *args, **kwargs)
        # The training loss here is a per-batch mean (the model's own loss plus penalties), so the Trainer must
        # divide it by the gradient-accumulation steps itself.
        if self.regularizers:
            self.loss_is_scaled_for_ga = False
        if model is not None and is_embreg_model(model):
            self.args.remove_unused_columns = False  # forward(batch) names no columns; keep them all
            if self.args.label_names is None:
                self.label_names = ["labels"]  # so evaluation computes the loss through compute_loss

    def compute_loss(
        self, model: nn.Module, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        unwrapped = self.accelerator.unwrap_model(model)
        if not model.training or not self.regularizers:
            if is_embreg_model(unwrapped):
                outputs = model(inputs)
                loss = unwrapped.loss(inputs, outputs)
                return (loss, {"logits": outputs.predictions}) if return_outputs else loss
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        total, outputs, penalty = regularized_loss(model, inputs, self.regularizers, step=self.state.global_step)
        self.last_penalty = float(penalty.detach())
        if return_outputs:
            return total, ({"logits": outputs.predictions} if isinstance(outputs, ModelOutput) else outputs)
        return total

    def training_step(self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: Any = None) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)
        hooks = [r for r in self.regularizers if hasattr(r, "after_backward")]
        if hooks:
            ctx = StepContext(model=self.accelerator.unwrap_model(model), batch=inputs, step=self.state.global_step)
            for regularizer in hooks:
                regularizer.after_backward(ctx)
        return loss
