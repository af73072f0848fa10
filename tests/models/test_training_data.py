"""Every model's prepared data is one form at the seam: a ``TrainingData`` (``X``, ``y``,
``num_classes``, ``mask``, ``inducing_mask``), padded or not, and the driver's count of
real rows reads it the same way for all of them."""

import numpy as np
import pytest

from ppgpc.models import available, get_spec
from ppgpc.models.spec import TrainingData
from ppgpc.runtime.padding import num_real_rows

from conftest import toy_problem


@pytest.mark.parametrize("name", available())
def test_prepared_data_is_training_data_padded_or_not(name):
    spec = get_spec(name)
    X, y = toy_problem(20, 3, seed=2)
    options = {"seed": 0} if spec.seeded_prepare else {}
    data = spec.prepare(X, y, 3, **options)
    assert isinstance(data, TrainingData)
    assert np.shape(data.X) == (20, 2) and np.shape(data.y) == (20,)
    assert data.num_classes == 3
    assert data.mask is None and data.inducing_mask is None
    assert num_real_rows(data) == 20
    if spec.pad is None:
        return
    padded = spec.pad(data, 32)
    assert isinstance(padded, TrainingData)
    assert np.shape(padded.X) == (32, 2) and np.shape(padded.mask) == (32,)
    np.testing.assert_array_equal(np.asarray(padded.mask), np.r_[np.ones(20), np.zeros(12)])
    assert num_real_rows(padded) == 20
    if padded.inducing_mask is not None:  # inducing inputs padded with the rows (M = N)
        assert int(np.sum(np.asarray(padded.inducing_mask))) == 20
