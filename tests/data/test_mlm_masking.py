"""BERT's masking: selection rate and the mask / random / keep split at a fixed seed; specials never touched."""

from __future__ import annotations

import pytest
import torch

from embreg.data.mlm_masking import IGNORE_INDEX, BertMasking, implicit_sse_rate
from embreg.errors import ConfigError

V, SPECIALS, MASK = 500, (0, 100, 101, 102, 103), 103


def _texts(n: int = 4000, t: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(104, V, (n, t), generator=g)
    lengths = torch.randint(4, t + 1, (n,), generator=g)
    attention = (torch.arange(t) < lengths[:, None]).long()
    ids[:, 0] = 101
    ids[torch.arange(n), lengths - 1] = 102
    ids[attention == 0] = 0
    ids[:, 1::17] = 100  # some [UNK]
    return ids, attention


@pytest.mark.parametrize(("rate", "mask_share", "random_share"), [(0.15, 0.8, 0.1), (0.3, 0.5, 0.25)])
def test_rates_match_their_settings(rate: float, mask_share: float, random_share: float) -> None:
    ids, attention = _texts()
    masking = BertMasking(V, SPECIALS, MASK, rate, mask_share, random_share)
    inputs, labels = masking(ids, attention, torch.Generator().manual_seed(1))
    words = attention.bool() & ~torch.isin(ids, torch.tensor(SPECIALS))
    selected = labels != IGNORE_INDEX
    n_words, n_selected = int(words.sum()), int(selected.sum())
    assert abs(n_selected / n_words - rate) < 0.005  # ~ 5 standard deviations at ~200k tokens
    masked = selected & (inputs == MASK)
    kept = selected & (inputs == ids)
    # a random draw equals the original id with probability 1 / (V - |specials|): counted as kept
    random = selected & (inputs != ids) & (inputs != MASK)
    p_same = random_share / (V - len(SPECIALS))
    assert abs(int(masked.sum()) / n_selected - mask_share) < 0.01
    assert abs(int(random.sum()) / n_selected - (random_share - p_same)) < 0.01
    assert abs(int(kept.sum()) / n_selected - (1 - mask_share - random_share + p_same)) < 0.01
    assert torch.equal(labels[selected], ids[selected])


def test_specials_and_padding_are_never_selected_nor_drawn() -> None:
    ids, attention = _texts()
    masking = BertMasking(V, SPECIALS, MASK, rate=1.0, mask_share=0.0, random_share=1.0)
    inputs, labels = masking(ids, attention, torch.Generator().manual_seed(2))
    special = torch.isin(ids, torch.tensor(SPECIALS)) | (attention == 0)
    assert (labels[special] == IGNORE_INDEX).all() and torch.equal(inputs[special], ids[special])
    assert not torch.isin(inputs[~special], torch.tensor(SPECIALS)).any()


def test_the_draws_follow_the_generator() -> None:
    ids, attention = _texts(50)
    masking = BertMasking(V, SPECIALS, MASK)
    first = masking(ids, attention, torch.Generator().manual_seed(3))
    again = masking(ids, attention, torch.Generator().manual_seed(3))
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))


def test_implicit_sse_rate_is_the_papers_reading() -> None:
    rates = implicit_sse_rate(0.15, 0.8, 0.1)
    assert rates["random"] == pytest.approx(0.015) and rates["replaced"] == pytest.approx(0.135)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"mask_share \+ random_share = 1.1 must be <= 1"):
        BertMasking(V, SPECIALS, MASK, mask_share=0.9, random_share=0.2)
    with pytest.raises(ConfigError, match=r"mask rate=0 must be in \(0, 1\]"):
        BertMasking(V, SPECIALS, MASK, rate=0)
