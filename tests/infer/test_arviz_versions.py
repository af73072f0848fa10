"""Every export is the installed ArviZ's own container, and ArviZ's diagnostics, LOO and
netCDF run on it: ``InferenceData`` under ArviZ 0.2x (Python 3.11), ``xarray.DataTree``
under ArviZ 1 (Python >= 3.12, beside PyMC 6). The same tests run under both; the CI leg on
Python 3.12 runs them with ArviZ 1 and PyMC 6 installed."""

import importlib.metadata
import warnings

import arviz as az
import numpy as np
import pytest
import xarray as xr

from arviz_versions import ARVIZ_1, group_names, loo
from fitted_cases import C, N, NUM_PRED, cases, fitted, toy
from ppgpc.evaluation import exports
from ppgpc.evaluation.arviz_objects import is_container
from ppgpc.infer import psis_loo, to_inference_data

GROUPS = {"posterior", "posterior_predictive", "log_likelihood", "observed_data",
          "constant_data", "predictions", "predictions_constant_data"}


def test_the_installed_arviz_is_the_one_this_python_resolves():
    """pyproject's markers: ArviZ 1 on Python >= 3.12, 0.2x on 3.11."""
    import sys

    major = int(importlib.metadata.version("arviz").split(".")[0])
    assert ARVIZ_1 == (major >= 1)
    assert (major >= 1) == (sys.version_info >= (3, 12))


@pytest.mark.parametrize("model, method", cases())
def test_every_export_is_the_installed_arviz_container(model, method, tmp_path):
    X, y = toy()
    result = fitted(model, method)
    idata = to_inference_data(result, X[:NUM_PRED], y_pred=y[:NUM_PRED])
    assert isinstance(idata, xr.DataTree if ARVIZ_1 else az.InferenceData)
    assert is_container(idata) and GROUPS <= set(group_names(idata))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # Pareto k and few-draws warnings on 30 points
        summary = az.summary(idata, var_names=["f"])
        elpd = loo(idata)
    assert len(summary) == N * result.spec.num_latent(C)
    assert np.isfinite(elpd.elpd) and elpd.elpd_i.shape == (N,)
    scores = exports.scores(idata)
    assert scores == exports.scores(np.asarray(result.predict_proba(X[:NUM_PRED])),
                                    y[:NUM_PRED])
    path = tmp_path / "export.nc"
    idata.to_netcdf(str(path))
    back = az.from_netcdf(str(path))
    assert type(back) is type(idata) and set(group_names(back)) == set(group_names(idata))
    np.testing.assert_array_equal(back.posterior["f"].values, idata.posterior["f"].values)
    assert exports.scores(back) == scores


def test_psis_loo_is_the_installed_arviz_elpd_that_az_compare_ranks():
    a, b = psis_loo(fitted("ilr_gp", "exact")), psis_loo(fitted("dirichlet_gp", "exact"))
    table = az.compare({"ilr": a, "gpd": b})
    assert set(table.index) == {"ilr", "gpd"}


def test_pymc_6_imports_beside_ppgpc():
    """The Python 3.12 leg installs PyMC 6 with ppgpc (``pip install . "pymc>=6"``): both
    import in one process and share ArviZ 1."""
    pm = pytest.importorskip("pymc", reason="PyMC is installed only in the Python 3.12 leg")
    import ppgpc

    assert int(pm.__version__.split(".")[0]) >= 6 and ARVIZ_1
    assert ppgpc.ILRGPClassifier is not None


def test_compare_posteriors_reads_the_installed_arviz_container():
    """An exact posterior against NUTS on the same model, both exports of the installed
    ArviZ: the point hyperparameters of one (constant_data) meet the draws of the other."""
    from ppgpc import compare_posteriors

    exact = to_inference_data(fitted("ilr_gp", "exact"))
    nuts = to_inference_data(fitted("ilr_gp", "nuts"))
    comparison = compare_posteriors(exact, nuts, var_names=["f", "kernel_variance"])
    assert list(comparison.table.index) == ["f", "kernel_variance"]
    assert comparison.table.loc["f", "n_elements"] == N * 2


def test_a_pymc_model_of_the_same_equations_samples_the_exact_ilr_posterior():
    """Notebook 08's claim: PyMC 6's NUTS on ILR-GP's latent model (f = chol(K) v, z_i ~
    N(f_i, sigma^2), ppgpc's K, sigma and targets) and ppgpc's exact posterior are the same
    posterior by ``compare_posteriors`` (no rejection at family-wise level 0.01); the same
    model with sigma 1.5 times too large is told apart (the test has the power to fail)."""
    pm = pytest.importorskip("pymc", reason="PyMC is installed only in the Python 3.12 leg")
    import pytensor.tensor as pt

    from ppgpc import compare_posteriors
    from ppgpc.datasets.synthetic import mixture_problem
    from ppgpc.gp.kernels import gram, kernel_params
    from ppgpc.infer import fit

    problem = mixture_problem(40, 10, num_classes=3, sigma=0.5, seed=0)
    exact = fit("ilr_gp", problem.X_train, problem.y_train, method="exact", num_draws=2000,
                seed=0)
    theta = {name: np.asarray(value[0, 0]) for name, value in exact.hypers.items()}
    K = np.asarray(gram(exact.kernel, kernel_params(theta), exact.data.X))
    chol = np.linalg.cholesky(K + 1e-9 * np.eye(len(K)))
    targets = np.asarray(exact.data.targets)
    N, L = targets.shape

    def nuts(noise_factor):
        with pm.Model(coords={"obs": np.arange(N), "latent": np.arange(L)}):
            v = pm.Normal("v", 0.0, 1.0, dims=("latent", "obs"))
            f = pm.Deterministic("f", pt.dot(chol, v.T), dims=("obs", "latent"))
            pm.Normal("z", mu=f, sigma=noise_factor * float(np.sqrt(exact.data.noise_var)),
                      observed=targets, dims=("obs", "latent"))
            return pm.sample(draws=500, tune=500, chains=4, random_seed=0, progressbar=False)

    ours = to_inference_data(exact)
    same = compare_posteriors(ours, nuts(1.0), var_names=["f"])
    assert not same.table.loc["f", "different"], same.table
    wrong = compare_posteriors(ours, nuts(1.5), var_names=["f"])
    assert wrong.table.loc["f", "different"], wrong.table
