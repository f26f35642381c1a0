"""Index transforms drawn on the host: a GPU training step's SSE swaps are made on the CPU batch before its copy.

On a GPU, a mini-batch step of MF or BPR is a few milliseconds of host time (Python and kernel launches). An index
transform called on CUDA ids adds its own launches and a host synchronisation (its range check) for every id kind
(docs/results/gpu-step-cost). A batch's ids are on the host anyway until the step copies them to the GPU. Drawing
them there costs one CPU call per id kind (the fused kernel of :mod:`embreg.sse._kernel` for SSE-SE and SSE-Graph),
the range check becomes a CPU reduction, and nothing is added to the GPU's queue.

What is drawn is exactly what the model's forward pass would draw. The model's ``draw_index_transforms(batch)`` makes
the same transform calls in the same order (:mod:`embreg.models.transform_sites`). During the step every transform
has ``passthrough`` set, so the forward passes (the regularisers' extra ones included) read the drawn ids. The
transforms draw from their CPU generators (SSE-Graph from a CPU copy of its graph, made once): with the same seed, a
run with host draws on a GPU and a run on the CPU draw the same swaps, and a checkpoint resumes on either device
without restarting the stream.

``train.index_transforms_on`` (:data:`MODES`):

* ``auto``: host draws when training on CUDA with a model that names where its transforms act and whose every
  transform is an embreg :class:`~embreg.sse.base.IndexTransform`; otherwise ``device``.
* ``host``: always (on the CPU it changes nothing but where the call is made); a clear error where it cannot be used.
* ``device``: the transforms run inside the forward pass, on the ids' device.

Example:
    >>> from embreg.models import BiasedMF
    >>> from embreg.sse import SSE
    >>> model = BiasedMF.build(4, 6, 2, item_transform=SSE(6, p=1.0, seed=0))
    >>> draws = plan_host_draws(model, torch.device("cpu"), "host")
    >>> batch = draws.draw({"user": torch.tensor([0, 1]), "item": torch.tensor([2, 3])})
    >>> bool((batch["item"] != torch.tensor([2, 3])).all())
    True
    >>> with draws.passed_through():  # the step's forward passes read the drawn ids as they are
    ...     model.item_transform(batch["item"]) is batch["item"]
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.sse.base import IndexTransform

__all__ = ["MODES", "HostDraws", "plan_host_draws"]

MODES = ("auto", "host", "device")
"""The values of ``train.index_transforms_on``."""


class HostDraws:
    """A model's index transforms, drawn on the CPU batch (:meth:`draw`) and passed through in the step.

    Args:
        model: a model with ``draw_index_transforms(batch)`` (:mod:`embreg.models.transform_sites`).
        transforms: its index transforms (every one an :class:`~embreg.sse.base.IndexTransform`).
    """

    def __init__(self, model: nn.Module, transforms: list[IndexTransform]) -> None:
        self.model = model
        self.transforms = transforms

    def draw(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """This step's ids, drawn where ``batch`` is; a drawn tensor is pinned when the one it replaces was."""
        drawn = self.model.draw_index_transforms(batch)  # type: ignore[operator]
        for key, value in drawn.items():
            source = batch.get(key)
            if value is not source and isinstance(source, torch.Tensor) and source.is_pinned():
                drawn[key] = value.pin_memory()
        return drawn

    @contextlib.contextmanager
    def passed_through(self) -> Iterator[None]:
        """Within the block every transform hands its ids back untouched (they were drawn by :meth:`draw`)."""
        for transform in self.transforms:
            transform.passthrough = True
        try:
            yield
        finally:
            for transform in self.transforms:
                transform.passthrough = False


def plan_host_draws(model: nn.Module, device: torch.device, mode: str, *, fused_step: bool = False) -> HostDraws | None:
    """The host draws of ``model`` training on ``device`` under ``train.index_transforms_on=mode``, or None.

    None means the transforms run inside the forward pass: ``mode="device"``; ``auto`` off CUDA or where host draws
    cannot be used; a model without index transforms.

    Raises:
        ConfigError: ``mode`` is not one of :data:`MODES`, or ``mode="host"`` where host draws cannot be used (the
            message says why).
    """
    if mode not in MODES:
        raise ConfigError(f"train.index_transforms_on={mode!r} is not a choice; use one of {', '.join(MODES)}")
    if mode == "device" or (mode == "auto" and device.type != "cuda"):
        return None
    transforms, refused = _drawable_transforms(model)
    if fused_step and transforms:
        refused.append("train.fused_step (its kernel calls the transforms inside the step)")
    if refused:
        if mode == "host":
            raise ConfigError(f"train.index_transforms_on=host cannot be used: {'; '.join(refused)}; use 'device'")
        return None
    return HostDraws(model, transforms) if transforms else None


def _drawable_transforms(model: Any) -> tuple[list[IndexTransform], list[str]]:
    """The model's index transforms and the reasons, if any, they cannot be drawn before the forward pass."""
    if not callable(getattr(model, "draw_index_transforms", None)) or not callable(
        getattr(model, "index_transforms", None)
    ):
        return [], [f"{type(model).__name__} does not say where its index transforms act (draw_index_transforms)"]
    transforms = model.index_transforms()
    foreign = [type(t).__name__ for t in transforms if not isinstance(t, IndexTransform)]
    if foreign:
        return [], [f"its transform(s) {', '.join(foreign)} are not embreg IndexTransforms (no passthrough)"]
    return transforms, []
