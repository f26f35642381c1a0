"""``TrainedRun.translate``: a translation run's serving adapter.

Lines of source text are tokenised with the run's source BPE vocabulary (the one it learnt on its training split,
kept in ``tokenizers.json``), cut to ``data.max_tokens`` source pieces like the training data, decoded with
:func:`embreg.nn.decoding.beam_search` (``beam = 1``: greedy) and detokenised with the target vocabulary. Empty
lines give empty translations. What the source side lost is counted (:class:`Translations`): the lines cut to
``data.max_tokens`` pieces, and the pieces the vocabulary does not hold (read as ``<unk>``). The command
``embreg translate`` is :mod:`embreg.serving.translate_command`.

Example:
    >>> t = Translations(["a house", ""], cut=1, unknown=0, max_tokens=24)
    >>> t.summary_line()
    '2 lines translated; 1 cut to data.max_tokens=24 source pieces, 0 unknown source pieces (<unk>)'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from embreg.errors import ConfigError

__all__ = ["translate", "Translations"]


class Translations(list):
    """The translations of the source lines, in order (a ``list`` of ``str``), and what the source side lost.

    Attributes:
        cut: source lines longer than ``max_tokens`` pieces, cut to them (as the training pairs were).
        unknown: source pieces outside the run's vocabulary, read as ``<unk>`` (counted in the pieces kept).
        max_tokens: the run's ``data.max_tokens``.
    """

    def __init__(self, texts: Sequence[str], *, cut: int = 0, unknown: int = 0, max_tokens: int = 0) -> None:
        super().__init__(texts)
        self.cut, self.unknown, self.max_tokens = cut, unknown, max_tokens

    def summary_line(self) -> str:
        """One line for stderr, e.g. ``"3 lines translated; 1 cut to data.max_tokens=24 source pieces, 0 unknown
        source pieces (<unk>)"``."""
        return (
            f"{len(self)} lines translated; {self.cut} cut to data.max_tokens={self.max_tokens} source pieces, "
            f"{self.unknown} unknown source pieces (<unk>)"
        )


def translate(
    run: Any,
    lines: Sequence[str],
    *,
    beam: int | None = None,
    alpha: float | None = None,
    beta: float | None = None,
    batch_size: int = 64,
) -> Translations:
    """Translations of ``lines`` by a loaded translation run (:func:`embreg.serving.load`).

    Args:
        run: a :class:`~embreg.serving.trained_run.TrainedRun` of task ``translation``.
        lines: source sentences.
        beam, alpha, beta: decoding (``None``: the run's ``data.beam``, ``data.alpha``, ``data.beta``).
        batch_size: sentences decoded together.

    Raises:
        ConfigError: ``beam < 1``, or an ``alpha`` / ``beta`` that is negative or not finite.
    """
    from embreg.tasks.translation.evaluation import DecodeSettings, translate_ids
    from embreg.tasks.translation.parallel import SPECIAL_TOKENS, encode_texts

    d = run.recipe.data
    settings = DecodeSettings(
        beam=d.beam if beam is None else beam,
        alpha=d.alpha if alpha is None else alpha,
        beta=d.beta if beta is None else beta,
        max_len=d.max_tokens + 1,
    )
    if settings.beam < 1 or not all(math.isfinite(v) and v >= 0 for v in (settings.alpha, settings.beta)):
        raise ConfigError(
            f"beam={settings.beam}, alpha={settings.alpha}, beta={settings.beta}: the beam must be >= 1, alpha and "
            "beta finite numbers >= 0"
        )
    tokenizers = run.prepared.tokenizers
    texts = [line.strip() for line in lines]
    wanted = [i for i, text in enumerate(texts) if text]
    out = [""] * len(texts)
    cut = unknown = 0
    if wanted:
        given = [texts[i] for i in wanted]
        cut = sum(len(e.ids) > d.max_tokens for e in tokenizers["source"].encode_batch(given))
        sources = encode_texts(tokenizers["source"], given, d.max_tokens, bos=False)
        unknown = sum(ids.count(SPECIAL_TOKENS.index("<unk>")) for ids in sources)
        ids = translate_ids(run.model, sources, settings, batch_size)
        for i, target in zip(wanted, ids):
            out[i] = tokenizers["target"].decode(target)
    return Translations(out, cut=cut, unknown=unknown, max_tokens=d.max_tokens)
