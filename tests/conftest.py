"""Shared test configuration.

Sizes: heavy statistical tests (long MCMC) read ``PPGPC_TEST_SIZE``; "small" (what CI sets)
shrinks chain lengths and problem sizes, and the tolerances, being derived from the
effective sample size actually achieved, stay principled at either size. Nothing is
skipped for being slow.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import ppgpc  # noqa: F401  (float64 and BLAS threads before any JAX code in the tests)

TEST_SIZE = os.environ.get("PPGPC_TEST_SIZE", "full").lower()
SMALL = TEST_SIZE == "small"


@pytest.fixture
def rng():
    """A fixed-seed NumPy generator for test data."""
    return np.random.default_rng(20261121)


def toy_problem(n: int = 40, num_classes: int = 3, seed: int = 0):
    """Well-separated 2-D Gaussian blobs on a circle: (X (n, 2), y (n,) in 0..C-1)."""
    gen = np.random.default_rng(seed)
    y = np.arange(n) % num_classes
    angles = 2 * np.pi * y / num_classes
    centres = np.stack([np.cos(angles), np.sin(angles)], axis=1) * 2.0
    return centres + 0.6 * gen.normal(size=(n, 2)), y
