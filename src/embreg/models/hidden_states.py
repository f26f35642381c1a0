"""How models hand their hidden states to regularisers: ``ModelOutput.hidden`` keys ``hidden_states.<i>``.

State ``h_0`` is the input of the first layer (for a transformer, the embedding output) and ``h_r`` the output of
layer ``r``, so a model with ``L`` layers returns ``L + 1`` states (lnsr-noise-stability-bert.txt, Sec. 3.1:
the input of layer ``b`` is ``x^b = h_{b-1}``).

Example:
    >>> import torch
    >>> sorted(hidden_states_dict([torch.zeros(1), torch.ones(1)]))
    ['hidden_states.0', 'hidden_states.1']
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["hidden_state_key", "hidden_states_dict"]


def hidden_state_key(index: int) -> str:
    """The ``ModelOutput.hidden`` key of state ``h_index`` (``0``: input of layer 1; ``r``: output of layer r)."""
    return f"hidden_states.{index}"


def hidden_states_dict(states: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
    """``{hidden_state_key(i): states[i]}`` for a forward pass's ``L + 1`` states, ready for ``ModelOutput.hidden``."""
    return {hidden_state_key(i): state for i, state in enumerate(states)}
