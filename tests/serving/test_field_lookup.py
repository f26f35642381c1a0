"""The click-field lookup of ``predict``: the Arrow fast path gives what the normalising path gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from embreg.serving.predicting import _field_indices, _normalised_indices
from embreg.serving.vocabulary import UNKNOWN, IdVocabulary


@pytest.mark.parametrize("dtype", ["string[pyarrow]", "string[python]", object])
def test_padded_missing_and_unknown_values_match_the_normalising_path(dtype) -> None:
    vocabulary = IdVocabulary("c0", np.array(["", "a", "b", "7"], dtype=object))
    values = pd.Series(["a", " b", "zz", None, "7", "b ", "a"], dtype=dtype)
    found = _field_indices(vocabulary, values)
    assert found.dtype == np.int64
    assert found.tolist() == [1, 2, UNKNOWN, 0, 3, 2, 1]
    assert found.tolist() == _normalised_indices(vocabulary, values.astype(object)).tolist()


def test_arrow_column_with_every_value_known_needs_no_fallback() -> None:
    vocabulary = IdVocabulary("c0", np.array(["x", "y"], dtype=object))
    values = pd.Series(["y", "x", "y"], dtype="string[pyarrow]")
    assert _field_indices(vocabulary, values).tolist() == [1, 0, 1]
