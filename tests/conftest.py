"""Shared test configuration.

Sizes: heavy statistical tests (long MCMC) read ``PPGPC_TEST_SIZE``; "small" (the default,
what the README's command and CI run; ``PPGPC_TEST_SIZE=full`` asks for the long runs)
shrinks chain lengths and problem sizes, and the tolerances, being derived from the
effective sample size actually achieved, stay principled at either size. Nothing is
skipped for being slow.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

# The suite compiles far more than it computes: hundreds of small XLA programs, one per eager
# op and shape and one per model and problem size. LLVM at -O0 cuts that compile time by a
# third; the heavy kernels (dot, Cholesky, triangular solves) are library calls and keep their
# speed. Measured on one core: test_compare_prints_a_table_and_writes_a_png 79 s -> 53 s,
# test_gibbs_matches_nuts_on_the_plain_model 69 s -> 46 s, notebook 01_quickstart 75 s -> 54 s.
# The tests check values, never timings; benchmarks/ and users keep XLA's defaults. Set
# before JAX creates its CPU client; notebook kernels and CLI subprocesses inherit it.
TEST_XLA_FLAG = "--xla_backend_optimization_level=0"
if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAG}".strip()

# BLAS threads: each of W test workers gets its share of the cores (all of them when tests run
# in one process). OpenBLAS's idle threads spin while they wait for work, so two processes on
# two cores, each with a full pool, take the cores from each other's working threads: two
# NUTS-and-Gibbs runs on wine take 312 s each side by side against 31 s alone, and 39 s with
# one BLAS thread each (`python benchmarks/side_by_side.py`, docs/records/speed.md). JAX's
# CPU LAPACK calls load SciPy's OpenBLAS at their first use, after this file, so the variable
# reaches it, and the notebook kernels and CLI subprocesses the workers start inherit it;
# threadpoolctl (from scikit-learn) limits the BLAS libraries already loaded.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _BLAS_THREADS = max(1, (os.cpu_count() or 1) // _WORKERS)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(_BLAS_THREADS))

    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=_BLAS_THREADS, user_api="blas")

import ppgpc.runtime  # noqa: E402,F401  (float64 before any JAX code in the tests)

TEST_SIZE = os.environ.get("PPGPC_TEST_SIZE", "small").lower()
SMALL = TEST_SIZE == "small"


LONGEST_FIRST = (
    "runtime/test_programs.py::test_every_estimator_at_sizes_of_held_buckets",
    "test_notebooks.py::test_notebook_runs_at_small_size",
    "models/test_logistic_softmax.py::test_sparse_svi_fits_magic_above_the_exact_limit",
    "runtime/test_devices.py",
    "infer/test_padding.py::test_svi_fits_equal_the_unpadded_fit",
    "runtime/test_programs.py::test_a_process_fitting_many_sizes_stops_growing",
    "test_golden.py::test_estimator_defaults_fit_as_recorded",
    "infer/test_far_from_data.py",
)
"""Tests that run a minute or more (``--durations`` of a CI run), longest first: they are
started first, so that with several workers (``-n auto``) none of them is left running
alone at the end while the other workers idle."""


def pytest_collection_modifyitems(config, items):
    """Run ``LONGEST_FIRST`` first, in its order; every other test keeps its place."""
    def rank(item) -> int:
        path = item.nodeid.removeprefix("tests/")
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if path.startswith(prefix)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every pyplot figure a test made: ppgpc's plots draw on pyplot's current axes,
    and the next test must start from none."""
    yield
    import sys

    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module.

    Every XLA CPU executable keeps three memory mappings (code, read-only data, data) for
    as long as some jit cache holds it, and the suite compiles thousands of them (one per
    function, shape and static argument). In one process that reached Linux's default limit
    of 65530 mappings per process about 85% of the way through (``python -m pytest``
    without workers), where LLVM's next mmap failed and the process died of a segmentation
    fault while compiling. Clearing the caches between modules keeps the count to what one
    module compiles.
    """
    yield
    import gc

    import jax

    jax.clear_caches()
    gc.collect()


@pytest.fixture
def uci_data_dir():
    """The folder of the larger UCI CSVs (``PPGPC_DATA_DIR``, which ``.ci/run`` sets); the
    test is skipped, with this reason shown, where it is not set."""
    folder = os.environ.get("PPGPC_DATA_DIR")
    if not folder:
        pytest.skip("PPGPC_DATA_DIR not set: point it to a folder with the larger UCI CSVs")
    return folder


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


def assert_exact_fit_classifies(result, X, y, *, num_classes: int, min_accuracy: float):
    """A driver fit by ``exact`` (or ``map``) predicts its own training data well.

    ``predict_proba(X)`` is (n, ``num_classes``) with rows summing to 1, its accuracy on
    ``(X, y)`` exceeds ``min_accuracy``, and the hyperparameter optimiser converged.
    """
    probs = result.predict_proba(X)
    assert probs.shape == (len(X), num_classes)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    assert np.mean(probs.argmax(1) == y) > min_accuracy
    assert result.info.optimizer.converged


def assert_estimator_conventions(clf, X, labels, classes: list, *, min_accuracy: float):
    """The conventions every fitted ppgpc estimator keeps (``ppgpc.estimators``).

    ``classes_`` holds ``classes``; ``predict_proba(X)`` is a NumPy array (n, C) whose rows
    sum to 1; ``predict`` returns labels from ``classes_``; ``score`` (the accuracy on
    ``(X, labels)``) exceeds ``min_accuracy``.
    """
    assert clf.classes_.tolist() == classes
    probs = clf.predict_proba(X)
    assert isinstance(probs, np.ndarray) and probs.shape == (len(X), len(classes))
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    assert set(clf.predict(X)) <= set(clf.classes_)
    assert clf.score(X, labels) > min_accuracy


def assert_nuts_matches_gaussian_posterior(nuts, mean, sd, *, min_ess: float,
                                           max_abs_z: float):
    """NUTS draws of the latent ``f`` against its exact Gaussian posterior, element by element.

    The differences of ArviZ's posterior means and standard deviations of ``f`` from the exact
    ones are measured in ArviZ's Monte Carlo standard errors, ``mcse_mean`` and ``mcse_sd``.
    (``mcse_sd`` uses the effective sample size of the second moment. NUTS draws of a Gaussian
    are often anti-correlated, so the bulk ESS of ``f`` can exceed the number of draws while
    the ESS of ``f**2`` is smaller; sd / sqrt(2 ESS_bulk) understated the sd's error.) The run
    must not diverge.

    Args:
        nuts: a latent-form NUTS ``FitResult`` whose posterior holds ``f`` (N, L).
        mean: (N, L) exact posterior means of f.
        sd: (N, L) exact posterior standard deviations of f.
        min_ess: every element's bulk ESS must exceed it.
        max_abs_z: every |z| of a mean or a standard deviation must stay below it.
    """
    import arviz as az

    from ppgpc.infer import to_inference_data

    N, L = mean.shape
    summary = az.summary(to_inference_data(nuts), var_names=["f"], round_to="none")
    m = summary["mean"].values.reshape(N, L)
    s = summary["sd"].values.reshape(N, L)
    ess = summary["ess_bulk"].values.reshape(N, L)
    assert ess.min() > min_ess
    z_mean = (m - mean) / summary["mcse_mean"].values.reshape(N, L)
    z_sd = (s - sd) / summary["mcse_sd"].values.reshape(N, L)
    assert np.max(np.abs(z_mean)) < max_abs_z, np.max(np.abs(z_mean))
    assert np.max(np.abs(z_sd)) < max_abs_z, np.max(np.abs(z_sd))
    assert nuts.info.sampler.divergences == 0


def grid_moments(log_post, m1, m2):
    """Posterior means and variances (2,) of (m1, m2) from an unnormalised log density
    ``log_post`` on the 2-D grid ``m1``, ``m2`` (``np.meshgrid(..., indexing="ij")``)."""
    w = np.exp(log_post - log_post.max())
    w /= w.sum()
    mean = np.array([np.sum(w * m1), np.sum(w * m2)])
    return mean, np.array([np.sum(w * m1**2), np.sum(w * m2**2)]) - mean**2


def assert_level_draws_match(levels, d, mean, var):
    """Independent chains of a level move against the level's posterior by quadrature.

    ``levels`` (S, n, C) are the chains' final values of a latent (or whitened) array whose
    contrasts must stay ``d`` (n, C) exactly; the class-mean level (S, n) must match the
    posterior ``mean`` and ``var`` (n,) within 4.5 Monte Carlo standard errors, and that
    posterior mean must be more than 10 standard errors from the prior's 0 somewhere (so a
    move that ignored the likelihood would fail)."""
    S = levels.shape[0]
    np.testing.assert_allclose(levels - levels.mean(-1, keepdims=True),
                               np.broadcast_to(d, levels.shape), atol=1e-12)
    m = levels.mean(-1)                                              # (S, n)
    z_mean = (m.mean(0) - mean) / np.sqrt(var / S)
    sq = (m - mean) ** 2
    z_var = (sq.mean(0) - var) / (sq.std(0) / np.sqrt(S))
    assert np.max(np.abs(z_mean)) < 4.5, z_mean
    assert np.max(np.abs(z_var)) < 4.5, z_var
    assert np.max(np.abs(mean) / np.sqrt(var / S)) > 10, mean / np.sqrt(var / S)


def polyagamma_cdf(b: float, z: float, *, points: int = 20001):
    """The CDF of PG(b, z) (b >= 1), for goodness-of-fit tests of Polya-Gamma draws.

    The density is the alternating series of ``ppgpc.polyagamma.polyagamma_log_prob``, which
    works in log space: cosh^b(z/2) exp(-z^2 x / 2) times the PG(b, 0) series, each term's
    exponent kept as a logarithm, so it neither overflows nor underflows at large z, where
    the law is concentrated near b / (2z) tanh(z/2). It is integrated by the trapezoidal rule
    on ``points`` points of [max(0, mean - 12 sd), mean + 30 sd]. Before the CDF is used the
    grid is checked to hold the law: the density must be finite up to mean + 8 sd (past the
    first NaN, where the series cancels in the far right tail, it counts as 0), its mass must
    be 1 to 1e-6, and its mean and variance the closed forms b tanh(z/2) / (2z) and
    b (sinh z - z) / (4 z^3 cosh^2(z/2)) to 1e-5 (relative; measured: 1e-13 for z >= 50,
    3e-6 for the variance of PG(5, 0), whose series density turns NaN 10 sd above the mean).

    Returns:
        ``cdf(x)``, vectorised (linear interpolation of the cumulative trapezoid sums).
    """
    import math

    import ppgpc.polyagamma as pg

    mean = float(pg.polyagamma_mean(b, z))
    sd = math.sqrt(float(pg.polyagamma_variance(b, z)))
    x = np.linspace(max(0.0, mean - 12 * sd), mean + 30 * sd, points)
    density = np.exp(np.asarray(pg.polyagamma_log_prob(x, b, z)))
    assert np.all(np.isfinite(density[x <= mean + 8 * sd])), (b, z)
    density = np.where(np.isfinite(density), density, 0.0)
    cdf = np.concatenate([[0.0], np.cumsum(np.diff(x) * (density[1:] + density[:-1]) / 2)])
    grid_mean = np.trapezoid(x * density, x)
    grid_var = np.trapezoid((x - mean) ** 2 * density, x)
    assert abs(cdf[-1] - 1) < 1e-6, (b, z, cdf[-1])
    assert abs(grid_mean / mean - 1) < 1e-5, (b, z, grid_mean, mean)
    assert abs(grid_var / sd**2 - 1) < 1e-5, (b, z, grid_var, sd**2)
    return lambda v: np.interp(v, x, cdf)


def compare_samplers(draws_a, draws_b):
    """Element-wise agreement of two samplers' draws of the same posterior.

    ``draws_a``, ``draws_b``: (chain, draw, *shape) arrays. ArviZ's summary of each gives the
    posterior mean and standard deviation of every element with their Monte Carlo standard
    errors ``mcse_mean`` and ``mcse_sd``; the differences between the samplers are returned in
    units of the combined error, z = (a - b) / sqrt(mcse_a^2 + mcse_b^2). ``mcse_sd`` uses the
    effective sample size of the squared deviations: sd / sqrt(2 ESS_bulk), used before,
    understated the sd's error of NUTS (about half of ``mcse_sd`` on the logistic-softmax
    posterior), so the correct Gibbs sampler came within 5% of the 4.5 limit against NUTS.

    Returns:
        A namespace with ``mean_a``, ``sd_a``, ``ess_a`` (bulk ESS), ``mean_b``, ``sd_b``,
        ``ess_b`` (each of ``shape``), ``z_mean`` and ``z_sd``.
    """
    from types import SimpleNamespace

    import arviz as az

    from arviz_versions import convert

    out = {}
    for tag, draws in (("a", draws_a), ("b", draws_b)):
        draws = np.asarray(draws)
        summary = az.summary(convert({"x": draws}), round_to="none")
        for key, column in (("mean", "mean"), ("sd", "sd"), ("ess", "ess_bulk"),
                            ("mcse_mean", "mcse_mean"), ("mcse_sd", "mcse_sd")):
            out[f"{key}_{tag}"] = summary[column].values.reshape(draws.shape[2:])
    z_mean = (out["mean_a"] - out["mean_b"]) / np.hypot(out["mcse_mean_a"], out["mcse_mean_b"])
    z_sd = (out["sd_a"] - out["sd_b"]) / np.hypot(out["mcse_sd_a"], out["mcse_sd_b"])
    return SimpleNamespace(**out, z_mean=z_mean, z_sd=z_sd)
