"""How injected noise spreads through a model's layers (lnsr-noise-stability-bert.txt, Fig. 1).

For each layer ``i`` in turn, Gaussian noise scaled so that its L2 norm is ``ratio`` (5%) of the norm of that
layer's output ``h_i`` is added to ``h_i``; the perturbed state is run through layers ``i+1..L`` and, at every layer
``r >= i``, the relative change ``||h~_r - h_r|| / ||h_r||`` is recorded (norms over each example's non-padding
tokens, averaged over examples). A curve therefore starts at ``ratio`` at the layer where the noise enters. The
paper finds the curves of BERT falling in the lower layers but rising again in the top layers, and lower, flatter
curves for models that generalise better.

``i = 0`` injects into the embedding output (the input of layer 1). The model runs in evaluation mode without
gradients, through its :class:`~embreg.regularizers.layer_stack.LayerStack`.

Example:
    >>> import torch
    >>> from torch import nn
    >>> from embreg.models.hidden_states import hidden_states_dict
    >>> from embreg.models.output import ModelOutput
    >>> from embreg.regularizers.layer_stack import SequentialStack
    >>> class Doubling(nn.Module):
    ...     def layer_stack(self):
    ...         return SequentialStack([nn.Identity(), nn.Identity()])
    ...     def forward(self, batch):
    ...         x = batch["x"]
    ...         return ModelOutput(x, hidden_states_dict([x, x, x]))
    >>> curves = noise_attenuation(Doubling(), {"x": torch.ones(2, 4)}, ratio=0.05)
    >>> [round(v, 3) for v in curves[0]]  # identity layers keep the 5% all the way up
    [0.05, 0.05, 0.05]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.regularizers.layer_stack import layer_stack

__all__ = ["noise_attenuation", "plot_attenuation", "save_attenuation"]


def _norms(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Per-example L2 norm over (valid tokens x features): ``(B, T, D) -> (B,)`` or ``(B, D) -> (B,)``."""
    if x.dim() == 3 and mask is not None:
        x = x * mask[:, : x.shape[1]].unsqueeze(-1).to(x.dtype)
    return x.reshape(x.shape[0], -1).norm(dim=1)


@torch.no_grad()
def noise_attenuation(
    model: nn.Module, batch: dict[str, torch.Tensor], *, ratio: float = 0.05, repeats: int = 1, seed: int = 0
) -> dict[int, list[float]]:
    """Relative change at every layer ``r >= i`` after noise of relative size ``ratio`` enters at layer ``i``.

    Args:
        model: a model with a layer stack whose forward returns its hidden states.
        batch: inputs (``attention_mask`` marks the tokens that count).
        ratio: noise norm as a fraction of the state's norm, per example (paper: 0.05).
        repeats: noise draws averaged per injection layer.
        seed: seed of the noise.

    Returns:
        ``{i: [change at layer i, i+1, ..., L]}`` for ``i = 0..L``.
    """
    if not 0 < ratio:
        raise ConfigError(f"ratio={ratio} must be > 0")
    if repeats < 1:
        raise ConfigError(f"repeats={repeats} must be >= 1")
    was_training = model.training
    model.eval()
    try:
        stack = layer_stack(model)
        states = stack.clean_states(model(batch))
        mask = batch.get("attention_mask")
        generator = torch.Generator(device=states[0].device).manual_seed(seed)
        curves: dict[int, list[float]] = {}
        for i in range(stack.num_layers + 1):
            total = torch.zeros(stack.num_layers + 1 - i)
            for _ in range(repeats):
                h = states[i]
                noise = torch.randn(h.shape, generator=generator, device=h.device, dtype=h.dtype)
                if h.dim() == 3 and mask is not None:
                    noise = noise * mask[:, : h.shape[1]].unsqueeze(-1).to(h.dtype)
                scale = ratio * _norms(h, mask) / _norms(noise, mask).clamp(min=1e-12)
                noisy_h = h + noise * scale.reshape(-1, *([1] * (h.dim() - 1)))
                outputs = [noisy_h] + (stack.run(noisy_h, batch, i + 1) if i < stack.num_layers else [])
                for k, (noisy, clean) in enumerate(zip(outputs, states[i:])):
                    change = _norms(noisy - clean, mask) / _norms(clean, mask).clamp(min=1e-12)
                    total[k] += change.mean().item()
            curves[i] = (total / repeats).tolist()
        return curves
    finally:
        model.train(was_training)


def save_attenuation(curves: Mapping[str, Mapping[int, list[float]]], path: str | Path, **meta: object) -> None:
    """Writes ``{"meta": ..., "curves": {model: {i: [...]}}}`` as JSON."""
    data = {"meta": meta, "curves": {name: {str(i): v for i, v in c.items()} for name, c in curves.items()}}
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


def plot_attenuation(curves: Mapping[str, Mapping[int, list[float]]], path: str | Path, *, title: str = "") -> None:
    """One panel per model: x = layer, y = relative change, one line per injection layer (paper Fig. 1).

    Args:
        curves: ``{model name: noise_attenuation(...)}``.
        path: the PNG to write.
        title: figure title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(curves)
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), sharey=True, squeeze=False)
    top = max(max(v) for c in curves.values() for v in c.values())
    for ax, name in zip(axes[0], names):
        for i, values in sorted(curves[name].items()):
            layers = list(range(int(i), int(i) + len(values)))
            ax.plot(layers, values, marker="o", markersize=3, label=f"noise at {'emb' if int(i) == 0 else int(i)}")
        ax.set_title(name)
        ax.set_xlabel("layer (0 = embedding output)")
        ax.set_ylim(0, top * 1.1)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("relative L2 change ||h~ - h|| / ||h||")
    axes[0][-1].legend(fontsize=7, loc="upper left")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
