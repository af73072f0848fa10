"""compare_posteriors: no difference between two runs of one sampler, a clear one against a
deliberately wrong posterior, and a permutation test that respects autocorrelation."""

import numpy as np
import pytest

from fitted_cases import fitted
from ppgpc import compare_posteriors
from ppgpc.evaluation.plotting import save_figure
from ppgpc.evaluation.posteriors import energy_test
from ppgpc.infer import to_inference_data


@pytest.fixture(scope="module")
def exact_draws():
    """Exact ILR-GP posteriors: two seeds, and one with lengthscales 4x too long."""
    return (to_inference_data(fitted("ilr_gp", "exact", seed=0)),
            to_inference_data(fitted("ilr_gp", "exact", seed=1)),
            to_inference_data(fitted("ilr_gp", "exact", seed=0, lengthscale_factor=4.0)))


def test_two_runs_of_the_same_sampler_agree(exact_draws):
    a, b, _ = exact_draws
    comparison = compare_posteriors(a, b, var_names=["f", "kernel_variance"],
                                    labels=("seed 0", "seed 1"))
    assert comparison.different == []
    assert comparison.table.loc["f", "p_value"] > 0.01 / 2
    # equal point hyperparameters compare as identical
    assert comparison.table.loc["kernel_variance", "max_abs_smd"] == 0.0
    assert comparison.table.loc["kernel_variance", "p_value"] == 1.0
    assert "seed 0" in repr(comparison) and "p_value" in repr(comparison)


def test_a_deliberately_wrong_posterior_is_found(exact_draws):
    a, _, wrong = exact_draws
    comparison = compare_posteriors(a, wrong, var_names=["f", "kernel_lengthscale",
                                                         "kernel_variance"])
    assert set(comparison.different) == {"f", "kernel_lengthscale"}
    assert comparison.table.loc["f", "p_value"] <= 1.0 / comparison.table.loc["f", "n_a"]
    assert comparison.table.loc["kernel_lengthscale", "max_abs_smd"] == np.inf
    assert comparison.table.loc["f", "max_abs_z"] > 5


def test_element_statistics_on_known_draws():
    """Two-point draws with known moments: mean difference -1, equal spreads."""
    base = np.tile([0.0, 2.0], 200).reshape(2, 200)    # mean 1, sd 1.0025 (ddof 1)
    comparison = compare_posteriors({"x": base}, {"x": base + 1.0})
    row = comparison.elements.iloc[0]
    sd = np.sqrt(400 / 399)
    assert row["mean_a"] == pytest.approx(1.0) and row["mean_b"] == pytest.approx(2.0)
    assert row["sd_a"] == pytest.approx(sd) and row["sd_ratio"] == pytest.approx(1.0)
    assert row["smd"] == pytest.approx(-1.0 / sd)
    assert comparison.different == ["x"]


def test_autocorrelated_draws_are_thinned_to_their_ess():
    """Pairs of independent AR(1) chains (phi = 0.9) from the same stationary law.

    The permutation test on the raw, autocorrelated draws rejects far more often than its
    level (its exchangeability assumption fails); after ESS thinning the rejection count at
    level 0.05 over 30 pairs stays within the binomial(30, 0.05) 99.9% bound (6).
    """
    rng = np.random.default_rng(12)

    def ar1(chains=2, n=400, phi=0.9):
        x = np.zeros((chains, n))
        x[:, 0] = rng.normal(size=chains) / np.sqrt(1 - phi**2)
        for t in range(1, n):
            x[:, t] = phi * x[:, t - 1] + rng.normal(size=chains)
        return x

    thinned_rejections, raw_rejections = 0, 0
    for i in range(30):
        a, b = ar1(), ar1()
        result = compare_posteriors({"x": a}, {"x": b}, num_permutations=200, seed=i)
        thinned_rejections += result.table.loc["x", "p_value"] < 0.05
        assert result.table.loc["x", "n_a"] < 150  # thinned to about the ESS (~40 in all)
        raw_rejections += energy_test(a[0, :, None], b[0, :, None], num_permutations=100,
                                      seed=i)[1] < 0.05
    assert thinned_rejections <= 6
    assert raw_rejections >= 10


def test_plot_overlays_both_posteriors(exact_draws, tmp_path):
    a, _, wrong = exact_draws
    comparison = compare_posteriors(a, wrong, var_names=["f"], labels=("exact", "wrong"))
    fig = comparison.plot(max_panels=6)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 6
    assert all(len(ax.get_lines()) == 2 for ax in panels)
    labels = [t.get_text() for t in panels[0].get_legend().get_texts()]
    assert labels == ["exact", "wrong"]
    assert save_figure(fig, tmp_path / "overlay.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_requests_are_clear_errors(exact_draws):
    a, _, _ = exact_draws
    with pytest.raises(ValueError, match="'nope' is not in both posteriors"):
        compare_posteriors(a, a, var_names=["nope"])
    with pytest.raises(ValueError, match="per-draw shape"):
        compare_posteriors({"x": np.zeros((1, 10, 2))}, {"x": np.zeros((1, 10, 3))},
                           var_names="x")
    with pytest.raises(TypeError, match="expected an InferenceData"):
        compare_posteriors([1, 2], a)
