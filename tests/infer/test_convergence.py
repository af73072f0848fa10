"""Every fit says whether to trust it: ``ppgpc.infer.convergence`` and
``ppgpc.evaluation.chain_diagnostics``.

The chain diagnostics are checked against ArviZ; the report against fits that must warn
(chains far too short, an optimiser stopped after two iterations, a search grid that ends
where the held-out NLL still falls) and fits that must not (the routine 1e-10 jitter of a
singular kernel matrix, converged optimisers).
"""

from __future__ import annotations

import math
import warnings

import arviz as az
import numpy as np
import pytest
import sklearn.exceptions

import ppgpc
from ppgpc.infer import fit
from ppgpc.evaluation.chain_diagnostics import chain_diagnostics
from ppgpc.infer.convergence import (JITTER_RELATIVE_MAX, ChainCheck, ConvergenceReport,
                                     ConvergenceWarning, OptimizerCheck, chain_check,
                                     falling_edge, grid_edge, warn_if_needed)


def _ar1_chains(rng, chains=4, draws=301, entries=40, shift=0.0):
    """AR(1) chains with coefficients in [0, 0.95), chain 1 shifted by up to ``shift``, and
    entry 0 of chain 2 repeating every value twice (ties, as rejections give)."""
    phi = rng.uniform(0.0, 0.95, size=entries)
    x = np.zeros((chains, draws, entries))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + rng.normal(size=(chains, entries))
    x[1] += rng.uniform(0.0, shift, size=entries)
    x[2, 1:, 0] = np.repeat(x[2, 1::2, 0], 2)[:draws - 1]
    return x


def test_chain_diagnostics_match_arviz(rng):
    """R-hat equals ArviZ's rank-normalised split R-hat; bulk and tail ESS are within 6%
    (NumPyro's truncation of Geyer's sequence against ArviZ's), odd draw counts and ties
    included, under ArviZ 0.2x and ArviZ 1 alike."""
    x = _ar1_chains(rng, shift=0.5)
    data = az.convert_to_dataset({"f": x})
    rhat, bulk, tail = chain_diagnostics(x)
    np.testing.assert_allclose(rhat, az.rhat(data, method="rank")["f"].values, rtol=1e-3)
    np.testing.assert_allclose(rhat[1:], az.rhat(data, method="rank")["f"].values[1:],
                               rtol=1e-12)
    np.testing.assert_allclose(bulk, az.ess(data, method="bulk")["f"].values, rtol=0.06)
    # the 5% and 95% quantiles (Vehtari et al. 2021), ArviZ 0.2x's default; ArviZ 1's
    # default takes its rcParams["stats.ci_prob"] (0.89) instead, so it is named here
    np.testing.assert_allclose(tail, az.ess(data, method="tail", prob=0.05)["f"].values,
                               rtol=0.06)


def test_chain_diagnostics_of_short_or_constant_draws_are_nan():
    rhat, bulk, tail = chain_diagnostics(np.ones((2, 3, 2)))
    assert np.all(np.isnan(rhat)) and np.all(np.isnan(bulk)) and np.all(np.isnan(tail))
    x = np.random.default_rng(0).normal(size=(2, 50, 2))
    x[:, :, 1] = 3.0
    rhat, bulk, _ = chain_diagnostics(x)
    assert np.isfinite(rhat[0]) and np.isnan(rhat[1]) and np.isnan(bulk[1])


def test_chain_check_passes_independent_draws_and_names_the_worst_entry(rng):
    ok = chain_check({"f": rng.normal(size=(4, 1000, 30)), "s": rng.normal(size=(4, 1000))})
    assert ok.problems() == [] and ok.max_rhat < 1.01 and ok.min_ess_bulk > 400
    bad = rng.normal(size=(4, 1000, 30))
    bad[0, :, 7] += 1.0  # one chain of one entry elsewhere
    check = chain_check({"f": bad}, divergences=3)
    assert check.worst == "f[7]" and check.max_rhat > 1.1
    assert any("R-hat" in p for p in check.problems())
    assert any("3 divergent" in p for p in check.problems())
    # a constant entry (a hyperparameter held fixed) is not checked
    fixed = np.concatenate([rng.normal(size=(2, 500, 3)), np.ones((2, 500, 1))], axis=2)
    assert chain_check({"f": fixed}).problems() == []


def test_report_round_trips_through_json_and_refuses_a_damaged_one():
    report = ConvergenceReport(
        method="gibbs",
        chains=ChainCheck(2, 20, 1.2, 15.0, 30.0, 0, "f[0, 1]"),
        optimizers=(OptimizerCheck("CAVI", False, 300, "max_iter", 2e-3,
                                   "relative ELBO change"),),
        max_jitter=1e-5, grid_edges=("tau 0.01 is the smallest value",))
    again = ConvergenceReport.from_dict(report.to_dict())
    assert again == report
    assert not again.converged and len(again.problems) == 5
    summary = again.summary(estimator=True)
    assert "R-hat 1.200 > 1.01" in summary and "CAVI did not converge" in summary
    assert "jitter 1.0e-05" in summary and "inference_options=" in summary
    assert "inference='nuts'" in summary
    with pytest.raises(ValueError, match="not a convergence report"):
        ConvergenceReport.from_dict({"method": "map"})


def test_falling_edge_and_grid_edge(rng):
    """A search ends at a falling edge when its best value is at an end of the grid and the
    per-point held-out NLL falls there by more than 0.001 and two standard errors of the
    paired differences."""
    base = rng.exponential(size=200)
    noise = lambda: 0.05 * rng.normal(size=200)  # noqa: E731
    interior = {0.1: base + 0.1, 0.2: base, 0.3: base + 0.05}
    assert falling_edge(interior) is None
    low = {0.1: base, 0.2: base + 0.02 + noise()}
    assert falling_edge(low) == "low"
    assert falling_edge({0.1: base + 0.02 + noise(), 0.2: base}) == "high"
    assert falling_edge({0.1: base, 0.2: base + 0.0005}) is None          # under 0.001
    flat = {0.1: base, 0.2: base + 0.003 + rng.normal(size=200)}          # within its noise
    assert falling_edge(flat) is None
    phrase = grid_edge("tau", low)
    assert phrase.startswith("tau 0.1 is the smallest value of its search grid")
    assert "standard errors" in phrase and grid_edge("tau", interior) is None


def test_the_warning_is_scikit_learns_and_a_driver_fit_can_leave_it_in_its_report():
    """``warn_if_needed`` raises scikit-learn's kind of warning; ``fit(..., warn=False)``
    (what the estimators run, to warn once for a whole fit) keeps the verdict in the
    result's report without a warning."""
    assert issubclass(ppgpc.ConvergenceWarning, sklearn.exceptions.ConvergenceWarning)
    bad = ConvergenceReport("exact", optimizers=(OptimizerCheck("L-BFGS", False, 2,
                                                                "max_iter"),))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_if_needed(bad)
    assert [w.category for w in caught] == [ConvergenceWarning]
    X, y = _problem()
    for warn, expected in ((False, []), (True, [ConvergenceWarning])):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fit("ilr_gp", X, y, method="exact", max_iter=2, warn=warn,
                         model_options={"epsilon": 0.05})
        assert not result.info.convergence.converged
        assert [w.category for w in caught if w.category is ConvergenceWarning] == expected


def _problem(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)


def _convergence_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]


def test_short_gibbs_chains_warn_once_naming_r_hat():
    X, y = _problem()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit("logistic_softmax", X, y, method="gibbs", num_warmup=20,
                     num_samples=20, max_samples=20, num_chains=2, progress_bar=False)
    messages = _convergence_warnings(caught)
    assert len(messages) == 1 and "R-hat" in messages[0] and "2 chain(s)" in messages[0]
    report = result.info.convergence
    assert report.chains.num_chains == 2 and report.chains.num_draws == 20
    assert report.optimizers[0].stage == "CAVI"  # the fit of the hyperparameters
    idata = ppgpc.to_inference_data(result)
    assert idata.posterior.attrs["ppgpc_converged"] == 0
    assert "R-hat" in idata.sample_stats.attrs["ppgpc_convergence"]


def test_an_optimiser_stopped_early_warns_and_a_converged_fit_does_not():
    X, y = _problem()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stopped = fit("ilr_gp", X, y, method="exact", max_iter=2)
        done = fit("ilr_gp", X, y, method="map")
    messages = _convergence_warnings(caught)
    assert len(messages) == 1 and "type-II ML (lbfgs) did not converge" in messages[0]
    assert "max_iter after 2 iterations" in messages[0]
    assert not stopped.info.convergence.converged
    assert done.info.convergence.converged


@pytest.mark.parametrize("method, options", [
    ("cavi", {"learn_hyperparameters": False, "max_iter": 30}),
    ("gibbs", {"num_warmup": 5, "num_samples": 5, "max_samples": 5, "num_chains": 1,
               "progress_bar": False}),
    ("nuts", {"form": "latent", "num_warmup": 5, "num_samples": 5, "max_samples": 5,
              "num_chains": 1,
              "progress_bar": False}),
])
def test_the_jitter_of_a_singular_kernel_matrix_is_reported_not_warned(method, options):
    """Duplicated inputs make K singular; its factorisation needs the first jitter, 1e-10
    of the mean diagonal, which every method reports (relative to the kernel variance)
    without counting it as a problem."""
    X, y = _problem(30)
    X, y = np.concatenate([X, X[:5]]), np.concatenate([y, y[:5]])
    hypers = {"kernel_variance": 2.0, "kernel_lengthscale": 1.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the chains are short
        result = fit("logistic_softmax", X, y, method=method, hyperparameters=hypers,
                     **options)
    report = result.info.convergence
    assert report.max_jitter == pytest.approx(1e-10, rel=1e-6)
    assert not any("jitter" in p for p in report.problems)
    assert "cholesky_jitter" not in result.hypers  # the NUTS site stays out of the posterior


def test_a_large_jitter_is_a_problem():
    report = ConvergenceReport("map", max_jitter=1e-5)
    assert not report.converged and "jitter 1.0e-05 of the kernel variance" in report.summary()


def test_an_estimator_warns_once_per_fit_and_keeps_its_report(tmp_path):
    """An ILR fit runs a leave-one-out search (one fit per tau) and the final fit, each with
    an optimiser stopped after 2 iterations: one warning for the whole fit; its report is
    the estimator's ``convergence_``, kept in the result and in a save."""
    X, y = _problem(40)
    est = ppgpc.ILRGPClassifier(progress=False, inference="exact",
                                inference_options={"max_iter": 2})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y)
    messages = _convergence_warnings(caught)
    assert len(messages) == 1 and messages[0].startswith(
        "the ILRGPClassifier fit may not be trusted")
    assert "inference_options" in messages[0]
    assert not est.convergence_.converged
    loaded = ppgpc.load(est.save(tmp_path / "ilr"))
    assert loaded.convergence_ == est.convergence_
    # the report's own advice, and the export's, name the estimator's options too
    for report in (est.convergence_, loaded.convergence_):
        assert "raise max_iter in inference_options" in report.summary()
    attrs = est.to_inference_data().posterior.attrs
    assert "raise max_iter in inference_options" in attrs["ppgpc_convergence"]


def test_a_search_extends_its_grid_past_a_falling_edge():
    """On wine the leave-one-out NLL falls towards small tau: the search goes past the
    grid's 0.01 and stops where the NLL no longer falls by more than 1e-3 per point (or
    reports the edge)."""
    from ppgpc.models.ilr_gp import TAU_GRID

    X, y = ppgpc.datasets.load("wine")
    est = ppgpc.ILRGPClassifier(progress=False).fit(X, y)
    assert min(est.tau_scores_) < min(TAU_GRID)
    edges = [e for e in est.convergence_.grid_edges if e.startswith("tau")]
    assert edges or falling_edge(est.tau_scores_) is None


# ------------------------------------------------------------ the thresholds at their edges
def _chains(rhat: float, bulk: float, tail: float, chains: int = 4) -> ChainCheck:
    return ChainCheck(chains, 1000, rhat, bulk, tail, 0, "f[0, 0]")


@pytest.mark.parametrize("rhat, bulk, tail, passes", [
    (1.0099, 400.0, 400.0, True),     # every value just inside
    (1.0101, 400.0, 400.0, False),    # R-hat just above 1.01
    (1.01, 400.0, 400.0, False),      # R-hat at 1.01: the bound is strict
    (1.0, 399.9, 1000.0, False),      # bulk ESS just below 100 per chain x 4 chains
    (1.0, 1000.0, 399.9, False),      # tail ESS just below it
    (1.0, 250.0, 250.0, False),       # above 100 (one chain's bound), below 400 (four's)
    (1.0, 400.0, 400.0, True),        # ESS at the bound passes
    (float("nan"), 1000.0, 1000.0, False),   # an undefined R-hat does not pass
])
def test_chain_thresholds_at_their_edges(rhat, bulk, tail, passes):
    """R-hat < 1.01 and bulk and tail ESS >= 100 per chain, in total over the chains: a
    report on either side of each bound (a wrong comparison, or ESS counted per chain, is
    caught here)."""
    check = _chains(rhat, bulk, tail)
    report = ConvergenceReport(method="nuts", chains=check)
    assert check.mixed is passes
    assert (check.problems() == []) is passes
    assert report.converged is passes
    if not passes:
        assert check.draws_needed() > 1000 or math.isnan(rhat)


def test_the_ess_bound_scales_with_the_chains():
    assert _chains(1.0, 200.0, 200.0, chains=2).mixed
    assert not _chains(1.0, 199.0, 200.0, chains=2).mixed
    assert not _chains(1.0, 200.0, 200.0, chains=3).mixed


@pytest.mark.parametrize("jitter, passes", [(0.99 * JITTER_RELATIVE_MAX, True),
                                             (JITTER_RELATIVE_MAX, True),
                                             (1.01 * JITTER_RELATIVE_MAX, False)])
def test_the_jitter_threshold_at_its_edge(jitter, passes):
    assert ConvergenceReport(method="map", max_jitter=jitter).converged is passes
