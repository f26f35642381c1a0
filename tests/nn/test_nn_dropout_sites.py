"""DropoutSite: reduce and expand are adjoint maps between entries and mask coordinates."""

import pytest
import torch

from embreg.errors import EmbregError
from embreg.nn import DropoutSite


@pytest.mark.parametrize("structure", ["element", "locked", "token"])
def test_reduce_is_the_adjoint_of_expand(structure):
    torch.manual_seed(0)
    h = torch.randn(3, 5, 4)
    ids = torch.randint(0, 7, (3, 5))
    site = DropoutSite(h, structure, ids=ids, num_rows=7)
    mask = torch.randn(site.mask_shape())
    x = torch.randn(3, 5, 4)
    # <expand(m), x> == <m, reduce(x)>
    assert torch.allclose((site.expand(mask) * x).sum(), (mask * site.reduce(x)).sum(), atol=1e-5)
    assert site.expand(mask).shape == h.shape


def test_token_site_shares_a_coordinate_per_word():
    h = torch.ones(1, 4, 2)
    site = DropoutSite(h, "token", ids=torch.tensor([[3, 1, 3, 3]]), num_rows=5)
    assert site.reduce(h).tolist() == [0.0, 2.0, 0.0, 6.0, 0.0]


def test_bad_sites_raise():
    with pytest.raises(EmbregError, match="structure"):
        DropoutSite(torch.ones(2), "rows")
    with pytest.raises(EmbregError, match="ids"):
        DropoutSite(torch.ones(2, 3, 4), "token")
