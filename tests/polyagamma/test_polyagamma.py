"""Statistical tests of ppgpc.polyagamma (docs/math.md section 3).

Tolerances come from Monte Carlo error: a sample mean must lie within Z_TOL standard errors
of the closed form (standard error from the known variance), a sample variance within Z_TOL
standard errors estimated from the sample fourth central moment. Goodness of fit is checked
by Kolmogorov-Smirnov tests against the CDF obtained by integrating the series density and,
when the ``polyagamma`` package is installed, against its Devroye sampler. Seeds are fixed,
so every test is deterministic; with Z_TOL = 5 and P_MIN = 1e-3 a correct sampler fails
for a given seed with probability below 5% over the whole file.

Compiling the sampler costs seconds per input shape, so the statistical tests share one
sample (the ``draws`` fixture) and the small tests share the shape (2, 3).
"""

from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from scipy import stats

import ppgpc.polyagamma as pg
import ppgpc.polyagamma.moments as pg_moments
import ppgpc.polyagamma.samplers as pg_samplers
from conftest import polyagamma_cdf

SMALL = os.environ.get("PPGPC_TEST_SIZE", "small").lower() == "small"
Z_TOL = 5.0
P_MIN = 1e-3

N_DRAWS = 4000 if SMALL else 10000
"""Draws per cell in the shared sample (a KS test then detects CDF errors of about 0.03)."""

B_GRID = (1, 2, 5, 50, 500)
Z_GRID = (0.0, 0.1, 1.0, 10.0, 50.0)
MOMENT_CELLS = [(b, z) for b in B_GRID for z in Z_GRID] + [(1, 1e3), (5, 1e3)]

GOF_CELLS = [(b, z) for b in (1, 2, 3) for z in (0.0, 1.0, 4.0, 10.0)]
"""z = 4 and 10 exceed 3.125 (c = z/2 > 1/t), where the left envelope component is the
inverse Gaussian truncated to (0, t), the case a careless truncation gets wrong."""

APPROX_Z = (0.0, 3.0, 11.9, 12.0, 50.0)
"""z where the approximation of PG(21, z) is compared with PG(20, z) + PG(1, z)."""

ALL_CELLS = sorted(
    set(MOMENT_CELLS) | set(GOF_CELLS) | {(b, z) for b in (1, 20, 21) for z in APPROX_Z}
)


def _draws(seed: int, cells, n: int) -> dict[tuple[float, float], np.ndarray]:
    """n draws for each (b, z) cell from one call; rows padded to a multiple of 16 with
    PG(0, 0) so that fewer shapes, hence fewer compilations, occur."""
    rows = -(-len(cells) // 16) * 16
    b, z = np.zeros((rows, 1)), np.zeros((rows, 1))
    b[: len(cells), 0], z[: len(cells), 0] = zip(*cells)
    shape = (rows, n)
    out = pg.sample_polyagamma(
        jax.random.key(seed), np.broadcast_to(b, shape), np.broadcast_to(z, shape)
    )
    return dict(zip(cells, np.asarray(out)))


@pytest.fixture(scope="module")
def draws() -> dict[tuple[float, float], np.ndarray]:
    """One shared sample: N_DRAWS draws for every cell of ALL_CELLS."""
    return _draws(0, ALL_CELLS, N_DRAWS)


def _density_on_grid(b: float, z: float, points: int = 10001) -> tuple[np.ndarray, np.ndarray]:
    """Series density of PG(b, z) on [0, mean + 25 sd].

    `polyagamma_log_prob` returns NaN in the far right tail, where its series cancels; the
    test requires that to start beyond mean + 8 sd (the mass there is below 1e-8 for
    b <= 5) and counts the density as 0 from there on.
    """
    mean = float(pg.polyagamma_mean(b, z))
    sd = math.sqrt(float(pg.polyagamma_variance(b, z)))
    x = np.linspace(0.0, mean + 25 * sd, points)
    density = np.exp(np.asarray(pg.polyagamma_log_prob(x, b, z)))
    assert np.all(np.isfinite(density[x <= mean + 8 * sd])), (b, z)
    return x, np.where(np.isfinite(density), density, 0.0)


def _series_cdf(b: float, z: float):
    """Total mass and CDF of PG(b, z), by trapezoidal integration of the series density."""
    x, density = _density_on_grid(b, z)
    cdf = np.concatenate([[0.0], np.cumsum(np.diff(x) * (density[1:] + density[:-1]) / 2)])
    return cdf[-1], lambda v: np.interp(v, x, cdf)


# ----------------------------------------------------------------------------------------
# Moments
# ----------------------------------------------------------------------------------------


def _check_moments(sample: np.ndarray, b: float, z: float) -> None:
    n = sample.shape[-1]
    mean, var = float(pg.polyagamma_mean(b, z)), float(pg.polyagamma_variance(b, z))
    centred = sample - sample.mean()
    m2, m4 = np.mean(centred**2), np.mean(centred**4)
    assert abs(sample.mean() - mean) <= Z_TOL * math.sqrt(var / n), (b, z, sample.mean(), mean)
    se_var = math.sqrt((m4 - m2**2) / n)
    assert abs(sample.var(ddof=1) - var) <= Z_TOL * se_var, (b, z, sample.var(), var)


def test_sample_moments_match_closed_forms(draws):
    """Mean and variance for b in {1, 2, 5, 50, 500} x z in {0, 0.1, 1, 10, 50}, and z = 1e3.

    b = 50 and 500 exercise the approximation (above the exact threshold 20); its mean and
    variance are exact by construction.
    """
    for b, z in MOMENT_CELLS:
        _check_moments(draws[(b, z)], b, z)


@pytest.mark.slow
def test_sample_moments_many_draws():
    """The same check with 20 times the draws of the shared sample."""
    cells = [(b, z) for b in (1, 5, 20) for z in (0.0, 1.0, 4.0, 50.0)]
    many = _draws(1, cells, 20 * N_DRAWS)
    for b, z in cells:
        _check_moments(many[(b, z)], b, z)


def test_b_zero_is_exactly_zero_and_invalid_b_is_nan():
    b = jnp.array([[0.0, 0.0, 0.0], [-1.0, jnp.nan, 3.0]])
    z = jnp.array([[0.0, -50.0, 1e6], [1.0, 1.0, jnp.inf]])
    omega = np.asarray(pg.sample_polyagamma(jax.random.key(2), b, z))
    np.testing.assert_array_equal(omega[0], 0.0)
    assert np.isnan(omega[1, 0]) and np.isnan(omega[1, 1])
    assert omega[1, 2] == 0.0  # PG(b, inf) is the point mass at 0 (mean b / (2z) -> 0)


def test_only_abs_z_matters_and_large_z_is_safe():
    b = jnp.array([[1.0, 3.0, 7.0], [50.0, 2.0, 20.0]])
    z = jnp.array([[0.5, 3.2, 50.0], [1e3, 1e8, 1e300]])
    key = jax.random.key(3)
    plus, minus = pg.sample_polyagamma(key, b, z), pg.sample_polyagamma(key, b, -z)
    np.testing.assert_array_equal(np.asarray(plus), np.asarray(minus))
    assert np.all(np.isfinite(plus)) and np.all(np.asarray(plus) > 0)


def test_moment_formulas_are_stable():
    """Series and closed forms agree where they switch; no overflow for huge z."""
    below, above = jnp.array(np.nextafter(0.5, 0.0)), jnp.array(0.5)
    units = (pg_moments._mean_unit, pg_moments._var_unit, pg_moments._kappa3_unit)
    mean_unit, var_unit, kappa3_unit = (jax.jit(f) for f in units)
    for f in (mean_unit, var_unit, kappa3_unit):
        assert abs(float(f(below)) / float(f(above)) - 1) < 1e-12
    assert float(pg.polyagamma_mean(1.0, 0.0)) == 0.25
    assert abs(float(pg.polyagamma_variance(1.0, 0.0)) * 24 - 1) < 1e-15
    z = jnp.array([1e3, 1e6, 1e100])
    np.testing.assert_allclose(pg.polyagamma_mean(3.0, z), 3 / (2 * z), rtol=1e-12)
    np.testing.assert_allclose(pg.polyagamma_variance(3.0, z), 3 / (2 * z**3), rtol=1e-12)
    # Each cumulant against its defining series (r - 1)! sum_k c_k^r; the first sum, whose
    # terms fall like k^-2, gets its remainder 1 / (2 pi^2 K) (error O(z^2 / K^3)).
    num = 1_000_000
    k = np.arange(1, num + 1)
    for zz in (0.0, 0.3, 2.0, 20.0):
        c = 1 / (2 * np.pi**2 * (k - 0.5) ** 2 + zz**2 / 2)
        zj = jnp.array(zz)
        mean_sum = np.sum(c) + 1 / (2 * np.pi**2 * num)
        assert abs(float(mean_unit(zj)) / mean_sum - 1) < 1e-10
        assert abs(float(var_unit(zj)) / np.sum(c**2) - 1) < 1e-12
        assert abs(float(kappa3_unit(zj)) / (2 * np.sum(c**3)) - 1) < 1e-10


# ----------------------------------------------------------------------------------------
# Goodness of fit
# ----------------------------------------------------------------------------------------


def test_ks_against_series_cdf(draws):
    for b, z in GOF_CELLS:
        total, cdf = _series_cdf(b, z)
        assert abs(total - 1) < 1e-6, (b, z, total)
        assert stats.kstest(draws[(b, z)], cdf).pvalue > P_MIN, (b, z)


LARGE_Z_CELLS = [(b, z) for b in (1, 5, 50) for z in (50.0, 200.0, 1000.0)]
"""Large z, where PG(b, z) concentrates near b / (2z) tanh(z/2) (b = 1 and 5: the exact
sampler; b = 50: the inverse-Gaussian approximation)."""


def test_ks_at_large_z_against_series_cdf():
    """Draws at z = 50, 200 and 1000 against the exact CDF by a KS test at level P_MIN.

    The reference (``conftest.polyagamma_cdf``) integrates the series density, evaluated in
    log space (cosh^b(z/2) exp(-z^2 x / 2) times the PG(b, 0) series), and first checks that
    it has mass 1 and the closed-form mean and variance. (The ``polyagamma`` package cannot
    be the reference here: its default sampler's PG(1, z) draws at z = 200, 300 and 1000
    have mean 0.160, where the truth is tanh(z/2) / (2z) = 0.0025, 0.0017 and 0.0005.) The
    draws come from one call of the shape of the shared sample (no new compilation), each
    cell filling rows // 9 of its rows: 20000 draws per cell at the small size, 50000 at
    the full size, so a CDF error of about 0.014 (0.009) is detected; a moment-matched
    normal in place of PG(1, 50) is 0.04 off."""
    rows = -(-len(ALL_CELLS) // 16) * 16
    per_cell = rows // len(LARGE_Z_CELLS)
    b, z = np.zeros((rows, 1)), np.zeros((rows, 1))
    for k, cell in enumerate(LARGE_Z_CELLS):
        b[k * per_cell:(k + 1) * per_cell], z[k * per_cell:(k + 1) * per_cell] = cell
    shape = (rows, N_DRAWS)
    out = np.asarray(pg.sample_polyagamma(jax.random.key(4), np.broadcast_to(b, shape),
                                          np.broadcast_to(z, shape)))
    for k, (bb, zz) in enumerate(LARGE_Z_CELLS):
        sample = out[k * per_cell:(k + 1) * per_cell].ravel()
        p = stats.kstest(sample, polyagamma_cdf(bb, zz)).pvalue
        assert p > P_MIN, f"PG({bb}, {zz}): KS p-value {p:.2e} over {sample.size} draws"


def test_ks_against_polyagamma_package(draws):
    polyagamma = pytest.importorskip("polyagamma")
    rng = np.random.default_rng(7)
    for b, z in GOF_CELLS:
        ref = polyagamma.random_polyagamma(b, z, size=N_DRAWS, method="devroye", random_state=rng)
        assert stats.ks_2samp(draws[(b, z)], ref).pvalue > P_MIN, (b, z)


def test_approximation_against_exact_sum(draws):
    """PG(21, z) by the approximation (b > 20) against PG(20, z) + PG(1, z), both exact."""
    for z in APPROX_Z:
        exact = draws[(20, z)] + draws[(1, z)]
        assert stats.ks_2samp(draws[(21, z)], exact).pvalue > P_MIN, z


def _gil_pelaez_sup_distance(b: float, z: float) -> float:
    """sup_x |F_approx(x) - F_exact(x)| by Gil-Pelaez inversion of the difference of the
    characteristic functions (exact: cosh^b(z/2) / cosh^b(sqrt(z^2/4 - i t/2)))."""
    zj = jnp.array(z)
    mean, sd = float(pg.polyagamma_mean(b, z)), math.sqrt(float(pg.polyagamma_variance(b, z)))
    u = np.linspace(1e-7, 60.0, 60001)
    t = u / sd

    def log_cosh(w):
        return w + np.log1p(np.exp(-2 * w)) - math.log(2)

    log_exact = b * (log_cosh(z / 2 + 0j) - log_cosh(np.sqrt(z * z / 4 - 0.5j * t)))
    ks = np.arange(1, pg_samplers._NUM_HEAD + 1)
    coef = 1 / (2 * np.pi**2 * (ks - 0.5) ** 2 + z * z / 2) * (z < pg_samplers._Z_HEAD)
    k1 = b * (float(pg_moments._mean_unit(zj)) - np.sum(coef))
    k2 = b * (float(pg_moments._var_unit(zj)) - np.sum(coef**2))
    k3 = b * (float(pg_moments._kappa3_unit(zj)) - 2 * np.sum(coef**3))
    mu = 3 * k2**2 / k3
    lam = mu**3 / k2
    log_approx = (
        -b * np.sum(np.log(1 - 1j * np.outer(t, coef)), axis=1)
        + 1j * t * (k1 - mu)
        + (lam / mu) * (1 - np.sqrt(1 - 2j * mu**2 * t / lam))
    )
    diff = np.exp(log_approx - 1j * t * mean) - np.exp(log_exact - 1j * t * mean)
    xi = np.linspace(-6, 10, 161)  # x = mean + xi sd
    integrand = np.imag(np.exp(-1j * np.outer(xi, u)) * diff) / u
    return float(np.max(np.abs(np.trapezoid(integrand, u, axis=1))) / np.pi)


@pytest.mark.slow
def test_approximation_error_is_as_documented():
    """Recompute the documented CDF error of the approximation (at most 5.4e-6 at b = 11)."""
    zs = (0.0, 12.0, 50.0) if SMALL else (0.0, 1.0, 3.0, 8.0, 11.0, 12.0, 13.0, 20.0, 50.0)
    assert max(_gil_pelaez_sup_distance(11.0, z) for z in zs) < 6e-6


# ----------------------------------------------------------------------------------------
# Density
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("b", [1.0, 2.0, 5.0])
@pytest.mark.parametrize("z", [0.0, 1.0, 10.0])
def test_log_prob_integrates_to_one_with_the_right_mean(b, z):
    x, density = _density_on_grid(b, z)
    assert abs(np.trapezoid(density, x) - 1) < 1e-6
    mean = float(pg.polyagamma_mean(b, z))
    assert abs(np.trapezoid(x * density, x) / mean - 1) < 1e-6


def test_log_prob_against_polyagamma_package():
    polyagamma = pytest.importorskip("polyagamma")
    for b, z in [(1, 0.0), (2, 1.0), (5, 3.0)]:
        x = np.linspace(0.05, 3, 30) * float(pg.polyagamma_mean(b, z))
        reference = np.log(polyagamma.polyagamma_pdf(x, h=b, z=z))
        np.testing.assert_allclose(pg.polyagamma_log_prob(x, b, z), reference, atol=1e-8)


def test_log_prob_edge_cases():
    x = jnp.array([0.0, -1.0, 0.0, 0.3])
    lp = pg.polyagamma_log_prob(x, jnp.array([1.0, 1.0, 0.0, 0.0]), 1.0)
    np.testing.assert_array_equal(np.asarray(lp), [-np.inf, -np.inf, 0.0, -np.inf])
    # far right tail of a large b: the cancelling series is refused rather than wrong
    assert np.isnan(float(pg.polyagamma_log_prob(40.0, 50.0, 0.0)))


# ----------------------------------------------------------------------------------------
# NumPyro distribution
# ----------------------------------------------------------------------------------------

B_SMALL = jnp.array([0.0, 1.0, 2.0])
Z_SMALL = jnp.array([[0.0], [3.0]])


def test_distribution_shapes_moments_and_log_prob():
    d = pg.PolyaGamma(B_SMALL, Z_SMALL)
    assert d.batch_shape == (2, 3) and d.event_shape == ()
    omega = d.sample(jax.random.key(10))
    assert omega.shape == (2, 3) and omega.dtype == jnp.float64
    np.testing.assert_array_equal(np.asarray(omega[:, 0]), 0.0)
    assert bool(jnp.all(omega[:, 1:] > 0))
    assert d.mean.shape == d.variance.shape == (2, 3)
    np.testing.assert_allclose(d.mean[0], [0.0, 0.25, 0.5])
    np.testing.assert_allclose(d.variance[0], [0.0, 1 / 24, 2 / 24])
    assert d.log_prob(omega).shape == (2, 3)
    x = jnp.full((2, 3), 0.2)
    np.testing.assert_allclose(d.log_prob(x), pg.polyagamma_log_prob(x, B_SMALL, Z_SMALL))


def test_distribution_under_jit_and_vmap():
    @jax.jit
    def draw(keys, b, z):
        return jax.vmap(lambda key: pg.PolyaGamma(b, z).sample(key))(keys)

    keys = jax.random.split(jax.random.key(11), 4)
    batched = draw(keys, B_SMALL, Z_SMALL)
    assert batched.shape == (4, 2, 3)
    np.testing.assert_array_equal(np.asarray(batched[:, :, 0]), 0.0)
    # the same key gives the same draws batched or not (shape (2, 3) is already compiled)
    np.testing.assert_array_equal(
        np.asarray(batched[2]), np.asarray(pg.PolyaGamma(B_SMALL, Z_SMALL).sample(keys[2]))
    )
    # a distribution passes through jit as a pytree, with its static fields
    d = pg.PolyaGamma(B_SMALL + 1, Z_SMALL, exact_threshold=5, num_terms=50)
    log_prob = jax.jit(lambda d, x: d.log_prob(x))(d, 0.3 * jnp.ones((2, 3)))
    assert log_prob.shape == (2, 3) and bool(jnp.all(jnp.isfinite(log_prob)))


def test_distribution_validates_b():
    with pytest.raises(ValueError):
        pg.PolyaGamma(jnp.array([1.0, -1.0]), 0.0, validate_args=True)
    with pytest.raises(ValueError):
        pg.PolyaGamma(1.5, 0.0, validate_args=True)
    pg.PolyaGamma(jnp.array([0, 3]), 1.0, validate_args=True)  # b = 0 is allowed


def test_distribution_in_a_numpyro_model():
    def model():
        numpyro.sample("omega", pg.PolyaGamma(B_SMALL, Z_SMALL))

    trace = numpyro.handlers.trace(numpyro.handlers.seed(model, 13)).get_trace()
    assert trace["omega"]["value"].shape == (2, 3)
