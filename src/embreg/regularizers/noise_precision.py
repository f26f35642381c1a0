"""Float32 for the noise passes of R3F and SMART when the step runs under autocast (bf16 or fp16).

R3F and SMART perturb the embedding output ``x`` by ``sigma`` / ``epsilon`` = 1e-5 (their defaults, after
lnsr-noise-stability-bert.txt Sec. 5.4) against entries of order 1. Reduced precision rounds such a perturbation
away: bfloat16 keeps 8 significant bits (a spacing of 2^-7 at 1), float16 11 bits (2^-10); on a small BERT, noise
of scale 1e-5 changes about 1% (bf16) and 4% (fp16) of the rounded entries of ``x``
(tests/regularizers/test_noise_precision.py). The penalty then measures the two passes' rounding, or nothing,
instead of the noise. Where autocast is on, these penalties therefore recompute the clean prediction from ``x`` in
float32 and run their perturbed passes in float32 too: one more forward and backward through the layers than in
fp32 training.

Example:
    >>> x = torch.ones(2, 3)
    >>> with torch.autocast("cpu", dtype=torch.bfloat16), float32_passes(x) as recompute:
    ...     recompute, (x @ x.T).dtype
    (True, torch.float32)
    >>> with float32_passes(x) as recompute:
    ...     recompute
    False
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["float32_passes"]


@contextlib.contextmanager
def float32_passes(x: torch.Tensor) -> Iterator[bool]:
    """Autocast off for ``x``'s device within the block; yields whether it was on (the clean pass must then be
    recomputed in float32 for the noise passes to be compared with it)."""
    if not torch.is_autocast_enabled(x.device.type):
        yield False
        return
    with torch.autocast(device_type=x.device.type, enabled=False):
        yield True
