"""Where dropout acts in a model and how its mask is shared: what the analytic regularisers need to know.

dropout-explicit-implicit-regularization.txt writes node dropout at layer ``i`` as ``h_drop = (1 + eta) * h``
(Sec. 2) with independent coordinates of ``eta``. Real models share one mask coordinate among many entries of
``h``: locked dropout shares it across time, embedding dropout across every occurrence of a word, DropConnect is a
mask on a weight. A :class:`DropoutSite` records the tensor ``h`` (as it enters the dropout) and that sharing, with
two maps between entries of ``h`` and mask coordinates:

* :meth:`DropoutSite.reduce` sums a tensor shaped like ``h`` over the entries that share a mask coordinate; applied to
  ``grad * h`` it gives the derivative of the loss with respect to the mask multipliers ``m = 1 + eta`` at ``m = 1``;
* :meth:`DropoutSite.expand` spreads one value per mask coordinate back to the shape of ``h``.

With the ``"element"`` structure (one coordinate per entry) these are identities, which is eq. 4.4 of the paper
literally (``diag(h_i ** 2)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from embreg.errors import EmbregError

__all__ = ["STRUCTURES", "DropoutSite"]

Structure = Literal["element", "locked", "token"]
STRUCTURES: tuple[str, ...] = ("element", "locked", "token")


@dataclass(frozen=True)
class DropoutSite:
    """One place where dropout noise enters a model.

    Attributes:
        tensor: ``h``: an activation in the autograd graph (e.g. ``(B, T, D)``) or a weight the forward used.
        structure: ``"element"`` (one mask entry per entry of ``h``), ``"locked"`` (shared along ``time_dim``) or
            ``"token"`` (``h`` is a ``(B, T, D)`` embedding lookup; one mask entry per word type, shared by all its
            occurrences in the batch, as in embedding dropout).
        time_dim: the shared axis of ``"locked"``.
        ids: ``(B, T)`` word ids of a ``"token"`` site.
        num_rows: vocabulary size of a ``"token"`` site.

    Example:
        >>> h = torch.ones(2, 3, 4)
        >>> site = DropoutSite(h, "locked")
        >>> site.reduce(h).shape, site.expand(torch.ones(2, 1, 4)).shape
        (torch.Size([2, 1, 4]), torch.Size([2, 3, 4]))
    """

    tensor: torch.Tensor
    structure: Structure = "element"
    time_dim: int = 1
    ids: torch.Tensor | None = None
    num_rows: int | None = None

    def __post_init__(self) -> None:
        if self.structure not in STRUCTURES:
            raise EmbregError(f"structure={self.structure!r} must be one of {STRUCTURES}")
        if self.structure == "locked" and not -self.tensor.dim() <= self.time_dim < self.tensor.dim():
            raise EmbregError(f"time_dim={self.time_dim} is outside [-{self.tensor.dim()}, {self.tensor.dim()})")
        if self.structure == "token":
            if self.ids is None or self.num_rows is None:
                raise EmbregError("a 'token' site needs ids (B, T) and num_rows (the vocabulary size)")
            if tuple(self.ids.shape) != tuple(self.tensor.shape[:-1]):
                raise EmbregError(
                    f"ids shape {tuple(self.ids.shape)} must equal the lookup's leading shape "
                    f"{tuple(self.tensor.shape[:-1])}"
                )

    def _token_index(self) -> tuple[torch.Tensor, int]:
        """``(ids, num_rows)`` of a ``"token"`` site (both set: :meth:`__post_init__` checks it)."""
        if self.ids is None or self.num_rows is None:
            raise EmbregError("a 'token' site needs ids (B, T) and num_rows (the vocabulary size)")
        return self.ids, self.num_rows

    def with_structure(self, structure: Structure) -> DropoutSite:
        """The same tensor with another sharing (e.g. ``"element"``, the paper's eq. 4.4)."""
        return DropoutSite(self.tensor, structure, self.time_dim, self.ids, self.num_rows)

    def mask_shape(self) -> tuple[int, ...]:
        """Shape of one mask draw for this site."""
        shape = list(self.tensor.shape)
        if self.structure == "locked":
            shape[self.time_dim] = 1
        elif self.structure == "token":
            shape = [int(self._token_index()[1])]
        return tuple(shape)

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sums ``x`` (shaped like ``h``) over the entries sharing each mask coordinate -> :meth:`mask_shape`."""
        if self.structure == "element":
            return x
        if self.structure == "locked":
            return x.sum(dim=self.time_dim, keepdim=True)
        ids, num_rows = self._token_index()
        per_token = x.sum(dim=-1).reshape(-1)
        out = per_token.new_zeros(int(num_rows))
        return out.index_add(0, ids.reshape(-1), per_token)

    def expand(self, mask: torch.Tensor) -> torch.Tensor:
        """Spreads a tensor of :meth:`mask_shape` to the shape of ``h``."""
        if self.structure == "token":
            mask = mask[self._token_index()[0]].unsqueeze(-1)
        return mask.expand(self.tensor.shape)
