"""The exact classifiers' smoothing search at the sizes people bring: warm starts, the
search on a stratified subsample past ``SEARCH_ROWS`` rows (and its falling edges), the
hyperparameters on a subsample past ``HYPER_ROWS``, and the switch to the collapsed sparse
fit past ``max_exact_points``."""

import warnings

import numpy as np
import pytest

import ppgpc
from conftest import toy_problem
from ppgpc import DirichletGPClassifier, ILRGPClassifier
from ppgpc.estimators import conjugate
from ppgpc.estimators.conjugate import GRID_EXTENSIONS, SEARCH_ROWS, SearchFit
from ppgpc.infer import fit
from ppgpc.infer.convergence import GRID_EDGE_TOLERANCE
from ppgpc.models.dirichlet_gp import ALPHA_EPS_GRID
from ppgpc.models.ilr_gp import TAU_GRID


@pytest.fixture(scope="module")
def separable():
    """Wine four times over, each copy's standardised inputs jittered by 0.3: 712 rows, more
    than ``SEARCH_ROWS``, whose leave-one-out NLL falls towards small smoothing levels, past
    both default grids (tau below 0.01, alpha_eps below 1e-4)."""
    X, y = ppgpc.datasets.load("wine")
    y = np.unique(y, return_inverse=True)[1]
    X = (X - X.mean(0)) / X.std(0)
    rng = np.random.default_rng(0)
    return (np.concatenate([X + 0.3 * rng.normal(size=X.shape) for _ in range(4)]),
            np.tile(y, 4))


def test_a_warm_start_begins_at_the_given_values_and_names_bad_sites():
    X, y = toy_problem(40, 3, seed=1)
    cold = fit("ilr_gp", X, y, method="exact", num_draws=1)
    warm = fit("ilr_gp", X, y, method="exact", num_draws=1,
               initial_hyperparameters=cold.hyper_draw())
    assert cold.info.optimizer.iterations > 5
    assert warm.info.optimizer.iterations <= 2   # it starts at the optimum
    for name, value in cold.hyper_draw().items():
        np.testing.assert_allclose(warm.hyper_draw()[name], value, rtol=1e-4)
    partial = fit("ilr_gp", X, y, method="exact", num_draws=1,
                  initial_hyperparameters={"kernel_variance": 3.0})
    assert partial.info.optimizer.converged
    with pytest.raises(ValueError, match="kernel_variance"):
        fit("ilr_gp", X, y, method="exact", initial_hyperparameters={"variance": 1.0})


def test_a_transported_ilr_fit_is_the_fit_at_another_epsilon():
    """Under type-II ML the ILR fit at one epsilon, carried to another by the change of the
    model's own start (the kernel variance times the squared target scale), is the other
    epsilon's optimum: the claim that lets the search warm-start every level."""
    X, y = toy_problem(45, 3, seed=2)
    est = ILRGPClassifier(inference="exact", progress=False)
    fits = {}
    for epsilon in (0.99, 0.999):
        options = est._options_for(epsilon, 0.1)
        result = fit("ilr_gp", X, y, method="exact", num_draws=1, model_options=options)
        fits[epsilon] = SearchFit(options, result.hyper_draw(), X, y)
    moved = est._transported_start(fits[0.99], X, y, 3, fits[0.999].options)
    for name, value in fits[0.999].hypers.items():
        np.testing.assert_allclose(moved[name], value, rtol=2e-3)


def test_the_final_fit_starts_from_the_chosen_level():
    """GPD's final fit is the chosen alpha_eps's search fit with more draws: started there,
    L-BFGS has nothing left to do."""
    X, y = toy_problem(60, 3, seed=4)
    est = DirichletGPClassifier(progress=False).fit(X, y)
    assert est.alpha_eps_ in est.alpha_eps_scores_
    assert est.n_iter_ <= 3


@pytest.mark.parametrize("make, scores, grid", [
    (lambda: ILRGPClassifier(), "tau_scores_", TAU_GRID),
    (lambda: DirichletGPClassifier(), "alpha_eps_scores_", ALPHA_EPS_GRID),
])
def test_a_subsampled_search_goes_past_a_falling_edge(separable, capfd, make, scores, grid):
    """Past ``SEARCH_ROWS`` rows the defaults score their smoothing levels on a stratified
    subsample; there too the search extends its grid while the NLL falls at the edge, and
    reports an edge it stops at."""
    X, y = separable
    est = make().fit(X, y)
    err = capfd.readouterr().err
    assert f"stratified subsample of {SEARCH_ROWS}" in err or \
        f"stratified subsample of {SEARCH_ROWS + 1}" in err, err
    assert f"(1/{len(grid)}): leave-one-out NLL" in err and " s left)" in err  # stage, ETA
    found = getattr(est, scores)
    assert min(found) < min(grid)
    name = scores[:-len("_scores_")]
    edges = [e for e in est.convergence_.grid_edges if e.startswith(name)]
    # it stopped by itself, or at its cap where the NLL no longer fell, or it says so
    values = sorted(found)
    at_cap = len(found) == len(grid) + GRID_EXTENSIONS
    assert edges or not at_cap or found[values[1]] - found[values[0]] <= GRID_EDGE_TOLERANCE
    assert est.score(X, y) > 0.95


@pytest.mark.parametrize("cls", [ILRGPClassifier, DirichletGPClassifier])
def test_past_max_exact_points_the_default_fit_goes_sparse_and_says_so(cls, tmp_path):
    X, y = toy_problem(90, 3, seed=6)
    with pytest.warns(UserWarning, match=r"90 training points exceed max_exact_points=60.*"
                                         r"pass max_exact_points=90"):
        est = cls(max_exact_points=60, num_inducing=20, progress=False).fit(X, y)
    assert est.result_.spec.name.endswith("_sparse")
    assert est.sparse_instead_ and est.convergence_.notes == (est.sparse_instead_,)
    assert "collapsed sparse GP" in est.convergence_.summary()
    assert est.score(X, y) > 0.9
    loaded = cls.load(est.save(tmp_path / "switched"))   # the note survives a save
    assert loaded.sparse_instead_ == est.sparse_instead_
    assert loaded.convergence_.notes == est.convergence_.notes
    # at the limit it stays exact, without a word; NUTS is refused as before
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        exact = cls(max_exact_points=90, progress=False).fit(X, y)
    assert not exact.result_.spec.name.endswith("_sparse") and not exact.convergence_.notes
    with pytest.raises(ValueError, match="too many for exact inference"):
        cls(inference="nuts", max_exact_points=60, progress=False).fit(X, y)


@pytest.mark.parametrize("cls", [ILRGPClassifier, DirichletGPClassifier])
def test_past_hyper_rows_a_subsample_fits_the_kernel_and_every_row_the_posterior(
        cls, monkeypatch, tmp_path):
    """Past ``HYPER_ROWS`` rows (here 50 of 120) the default's hyperparameters are the
    type-II MAP optimum at the chosen level on a stratified subsample (a fit started there
    stops at once; on all the rows it does not), and the exact posterior is conditioned on
    every row with them (the fit with those values given predicts the same). The report
    carries the subsample fit's check and says what was done; a save keeps both."""
    monkeypatch.setattr(conjugate, "HYPER_ROWS", 50)
    X, y = toy_problem(120, 3, seed=8)
    est = cls(progress=False).fit(X, y)
    report = est.convergence_
    assert len(report.notes) == 1 and "stratified subsample of" in report.notes[0]
    assert "of 120 rows; the exact posterior conditioned on all of them" in report.notes[0]
    assert len(report.optimizers) == 1 and report.optimizers[0].converged
    assert report.optimizers[0].iterations > 2 and report.converged
    level = ({"epsilon": est.epsilon_, "tau": est.tau_} if cls is ILRGPClassifier
             else {"alpha_eps": est.alpha_eps_})
    options = est._options_for(*level.values())
    rows = est._stratified_rows(y, 50)
    assert 50 <= len(rows) <= 52
    name, hypers = est.result_.spec.name, est.hyperparameters_
    Xs = est.standardizer_.transform(X)   # what the estimator fitted on
    on_rows = fit(name, Xs[rows], y[rows], method="map", num_draws=1, model_options=options,
                  initial_hyperparameters=hypers)
    on_all = fit(name, Xs, y, method="map", num_draws=1, model_options=options,
                 initial_hyperparameters=hypers)
    assert on_rows.info.optimizer.iterations <= 2 < on_all.info.optimizer.iterations
    given = cls(progress=False, **level, inference_options={"hyperparameters": hypers}).fit(X, y)
    np.testing.assert_allclose(given.predict_proba(X), est.predict_proba(X), rtol=1e-9)
    assert given.convergence_.notes == ()
    loaded = cls.load(est.save(tmp_path / "subsampled"))
    assert loaded.convergence_.notes == report.notes
    assert loaded.convergence_.optimizers == report.optimizers
