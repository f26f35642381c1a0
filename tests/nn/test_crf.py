"""The linear-chain CRF against brute-force enumeration, its constraints, gradients and errors."""

from __future__ import annotations

import itertools

import pytest
import torch

from embreg.errors import ConfigError, EmbregError
from embreg.nn.crf import (
    CRF,
    allowed_transitions,
    crf_log_partition,
    crf_path_score,
    invalid_transition,
    viterbi_decode,
)

BIO = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
IOBES = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]


def _path_score(e: torch.Tensor, path: tuple[int, ...], trans, start, end) -> torch.Tensor:
    """The obvious sum for one sequence ``e (L, K)``."""
    total = start[path[0]] + e[0, path[0]]
    for t in range(1, len(path)):
        total = total + trans[path[t - 1], path[t]] + e[t, path[t]]
    return total + end[path[-1]]


def _brute_force(crf: CRF, emissions: torch.Tensor, lengths: list[int]):
    """log Z, the best score and a best path of every sequence, by enumerating every path of every length."""
    trans, start, end = crf.scores()
    log_z, best, paths = [], [], []
    for b, length in enumerate(lengths):
        scored = [
            (_path_score(emissions[b, :length], p, trans, start, end), p)
            for p in itertools.product(range(crf.num_tags), repeat=length)
        ]
        values = torch.stack([s for s, _ in scored])
        log_z.append(torch.logsumexp(values, dim=0))
        top = int(values.argmax())
        best.append(values[top])
        paths.append(scored[top][1])
    return torch.stack(log_z), torch.stack(best), paths


def _batch(k: int, lengths: list[int], seed: int, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    emissions = torch.randn(len(lengths), max(lengths), k, generator=g, dtype=torch.float64) * scale
    mask = torch.arange(max(lengths)).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return emissions, mask


def _crf(tags: list[str] | int, scheme: str, seed: int) -> CRF:
    torch.manual_seed(seed)
    k = tags if isinstance(tags, int) else len(tags)
    names = None if isinstance(tags, int) else tags
    return CRF(k, tags=names, scheme=scheme, init_range=1.0).double()


@pytest.mark.parametrize(("tags", "scheme"), [(3, "none"), (BIO, "bio"), (IOBES[:5], "iobes")])
def test_log_partition_and_viterbi_equal_brute_force(tags, scheme: str) -> None:
    crf = _crf(tags, scheme, 0)
    lengths = [4, 1, 3, 2]
    emissions, mask = _batch(crf.num_tags, lengths, seed=1)
    log_z, best, paths = _brute_force(crf, emissions, lengths)
    torch.testing.assert_close(crf.log_partition(emissions, mask), log_z)
    transitions, start, end = crf.scores()
    score, decoded = viterbi_decode(emissions, mask, transitions, start, end)
    torch.testing.assert_close(score, best)
    for b, length in enumerate(lengths):
        assert tuple(decoded[b, :length].tolist()) == paths[b]
        assert (decoded[b, length:] == -1).all()


def test_the_log_likelihoods_of_all_paths_sum_to_one() -> None:
    crf = _crf(BIO, "bio", 2)
    emissions, _ = _batch(crf.num_tags, [3], seed=3)
    every = torch.tensor(list(itertools.product(range(crf.num_tags), repeat=3)))
    ll = crf(emissions.expand(len(every), -1, -1), every)
    torch.testing.assert_close(ll.exp().sum(), torch.tensor(1.0, dtype=torch.float64))
    valid = torch.tensor([invalid_transition([BIO[i] for i in p], "bio") is None for p in every.tolist()])
    assert torch.isinf(ll[~valid]).all() and torch.isfinite(ll[valid]).all()


def test_padded_steps_change_nothing() -> None:
    crf = _crf(4, "none", 4)
    emissions, _ = _batch(4, [3], seed=5)
    tags = torch.tensor([[1, 3, 2]])
    padded = torch.cat([emissions, torch.randn(1, 2, 4, dtype=torch.float64)], dim=1)
    padded_tags = torch.cat([tags, torch.tensor([[0, 0]])], dim=1)
    mask = torch.tensor([[True, True, True, False, False]])
    torch.testing.assert_close(crf(padded, padded_tags, mask), crf(emissions, tags))
    assert crf.decode(padded, mask)[0, :3].tolist() == crf.decode(emissions)[0].tolist()


def test_gradients_reach_every_parameter_and_the_emissions() -> None:
    crf = _crf(BIO, "bio", 6)
    emissions, mask = _batch(crf.num_tags, [5, 3], seed=7)
    emissions.requires_grad_(True)
    tags = torch.tensor([[1, 2, 0, 3, 4], [0, 1, 2, 0, 0]])
    (-crf(emissions, tags, mask).sum()).backward()
    for name, p in crf.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
    assert torch.isfinite(emissions.grad).all() and (emissions.grad[1, 3:] == 0).all()
    # a disallowed score gets no gradient: it is -inf whatever its parameter
    assert (crf.transitions.grad[~crf.transitions_allowed] == 0).all()
    assert (crf.start_transitions.grad[~crf.start_allowed] == 0).all()


def test_gradcheck_of_the_log_likelihood() -> None:
    crf = _crf(IOBES[:5], "iobes", 8)
    emissions, mask = _batch(crf.num_tags, [3, 2], seed=9)
    tags = torch.tensor([[1, 2, 3], [4, 0, 0]])

    def ll(e, trans, start, end):
        from embreg.nn.crf import constrain, crf_log_likelihood

        return crf_log_likelihood(
            e,
            tags,
            mask,
            constrain(trans, crf.transitions_allowed),
            constrain(start, crf.start_allowed),
            constrain(end, crf.end_allowed),
        )

    inputs = [emissions, crf.transitions.detach(), crf.start_transitions.detach(), crf.end_transitions.detach()]
    assert torch.autograd.gradcheck(ll, [x.clone().requires_grad_(True) for x in inputs])


@pytest.mark.parametrize(("tags", "scheme"), [(BIO, "bio"), (IOBES, "iobes")])
def test_constrained_decoding_never_emits_an_invalid_sequence(tags: list[str], scheme: str) -> None:
    """Property over random emissions, strongly pushing towards invalid tags (I- first, E- without B-, ...)."""
    crf = CRF(len(tags), tags=tags, scheme=scheme)
    for seed in range(30):
        lengths = torch.randint(1, 12, (16,), generator=torch.Generator().manual_seed(seed)).tolist()
        emissions, mask = _batch(len(tags), lengths, seed=seed, scale=10.0)
        decoded = crf.decode(emissions.float(), mask)
        for row, length in zip(decoded.tolist(), lengths, strict=True):
            names = [tags[i] for i in row[:length]]
            assert invalid_transition(names, scheme) is None, names


def test_the_same_emissions_decode_invalid_without_constraints() -> None:
    """The property test can fail: unconstrained, the argmax path starts with I-PER."""
    emissions = torch.tensor([[[0.0, 0.0, 5.0, 0.0, 0.0]]])
    free = CRF(5, tags=BIO, scheme="none", init_range=0.0)
    bio = CRF(5, tags=BIO, scheme="bio", init_range=0.0)
    assert free.decode(emissions).tolist() == [[2]]
    assert bio.decode(emissions).tolist() != [[2]]


def test_bio_and_iobes_rules() -> None:
    start, trans, end = allowed_transitions(BIO, "bio")
    assert start.tolist() == [True, True, False, True, False] and end.all()
    assert not trans[BIO.index("B-PER"), BIO.index("I-LOC")] and trans[BIO.index("I-PER"), BIO.index("I-PER")]
    assert not trans[BIO.index("O"), BIO.index("I-PER")]
    start, trans, end = allowed_transitions(IOBES, "iobes")
    idx = IOBES.index
    assert not start[idx("E-PER")] and not start[idx("I-PER")] and start[idx("S-LOC")]
    assert not end[idx("B-PER")] and not end[idx("I-PER")] and end[idx("E-PER")]
    assert trans[idx("B-PER"), idx("E-PER")] and not trans[idx("B-PER"), idx("O")]
    assert not trans[idx("E-PER"), idx("I-PER")] and trans[idx("E-PER"), idx("B-LOC")]
    assert invalid_transition(["B-PER", "I-PER", "E-PER", "S-LOC", "O"], "iobes") is None
    assert invalid_transition(["B-PER", "I-LOC"], "bio") == 1


def test_bad_settings_and_inputs_are_refused() -> None:
    with pytest.raises(ConfigError, match="scheme='bilou' must be one of bio, iobes, none"):
        CRF(3, tags=["O", "B-X", "I-X"], scheme="bilou")
    with pytest.raises(ConfigError, match="needs the tag names"):
        CRF(3, scheme="bio")
    with pytest.raises(ConfigError, match="tag 'E-X' is not a BIO tag"):
        CRF(2, tags=["O", "E-X"], scheme="bio")
    crf = CRF(3)
    with pytest.raises(ConfigError, match=r"emissions must be \(B, T, 3\)"):
        crf.decode(torch.zeros(1, 2, 4))
    with pytest.raises(EmbregError, match="right padding"):
        crf.decode(torch.zeros(1, 3, 3), torch.tensor([[True, False, True]]))
    with pytest.raises(EmbregError, match="right padding"):
        crf(torch.zeros(1, 2, 3), torch.zeros(1, 2, dtype=torch.long), torch.tensor([[False, True]]))


def test_path_score_is_vectorised_over_the_batch() -> None:
    crf = _crf(3, "none", 10)
    emissions, mask = _batch(3, [3, 2], seed=11)
    tags = torch.tensor([[0, 2, 1], [1, 1, 0]])
    trans, start, end = crf.scores()
    got = crf_path_score(emissions, tags, mask, trans, start, end)
    want = [
        _path_score(emissions[0], (0, 2, 1), trans, start, end),
        _path_score(emissions[1, :2], (1, 1), trans, start, end),
    ]
    torch.testing.assert_close(got, torch.stack(want))
    assert crf_log_partition(emissions, mask, trans, start, end).shape == (2,)


def test_half_precision_emissions_are_scored_in_float32() -> None:
    crf = _crf(BIO, "bio", 12).float()
    emissions, mask = _batch(crf.num_tags, [4, 2], seed=13)
    tags = torch.tensor([[1, 2, 0, 3], [0, 1, 0, 0]])
    low = emissions.to(torch.bfloat16)
    ll = crf(low, tags, mask)
    assert ll.dtype == torch.float32
    torch.testing.assert_close(ll, crf(low.float(), tags, mask))
