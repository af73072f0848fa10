"""One tiny fit per (model, method), shared by the export, persistence and comparison tests.

Every test module that imports this gets the same cached fits, so each (model, method) is
compiled and run once per pytest process. The problem is tiny (N = 30, C = 3, D = 2) and
the runs short: these fits test plumbing (export, saving, comparison), not the samplers,
which the model test modules check statistically.

Hyperparameters are given (the model's ``initial_hypers``) wherever the method accepts
them, so no run pays for an L-BFGS or CAVI hyperparameter fit; ``exact`` and ``map`` then
differ only in name, which is what the export must record. ``HYPERPARAMETER_CASES`` are the
few that fit their hyperparameters (``fitted(..., fit_hyperparameters=True)``), so that the
golden file also pins the objectives, priors and optimisers that choose them. The cases are
enumerated from the model registry and ``supported_methods``, so a newly registered model
or method (SVI) is picked up without editing this file, as long as ``METHOD_OPTIONS`` knows
the method."""

from __future__ import annotations

import functools

import numpy as np

from conftest import toy_problem
from ppgpc.gp.kernels import make_kernel
from ppgpc.infer import fit, supported_methods
from ppgpc.models import available, get_spec

N, C, D = 30, 3, 2
NUM_PRED = 6
SHORT_MCMC = {"num_warmup": 40, "num_samples": 60, "max_samples": 60, "num_chains": 2,
              "progress_bar": False}

METHOD_OPTIONS = {
    "exact": {"num_draws": 60},
    "map": {"num_draws": 60},
    "nuts": dict(SHORT_MCMC, max_tree_depth=5),
    "gibbs": dict(SHORT_MCMC),
    "cavi": {"num_draws": 60, "max_iter": 15},
    "svi": {"num_draws": 60, "max_iter": 40, "learning_rate": 0.01, "warmup_steps": 5,
            "progress_bar": False},
}
"""Options of each method for the shared fits (methods not listed are not exercised)."""

_TAKES_HYPERPARAMETERS = ("exact", "map", "nuts", "gibbs", "cavi")


def toy():
    """(X (30, 2), y (30,)) three well-separated classes; X_pred = X[:NUM_PRED]."""
    return toy_problem(N, C, seed=0)


def model_options(model: str) -> dict:
    return {"num_inducing": 8} if model.endswith("_sparse") else {}


def initial_hyperparameters(model: str) -> dict:
    """The model's starting hyperparameters on the toy problem, as NumPy arrays."""
    spec = get_spec(model)
    X, y = toy()
    data = spec.prepare(X, y, C, **model_options(model))
    return {k: np.asarray(v) for k, v in spec.initial_hypers(data, make_kernel("rbf-ard")).items()}


CORE_MODELS = ("ilr_gp", "ilr_gp_sparse", "dirichlet_gp", "dirichlet_gp_sparse",
               "logistic_softmax")
"""Models whose methods are exercised; another registered model (the SVGP specs) adds only
a method no earlier case has (``svi``, once)."""

SAME_PATH = {("dirichlet_gp", "nuts"): ("ilr_gp", "nuts")}
"""Cases left out because another case runs the same runner and export path: GPD's
collapsed NUTS is ILR-GP's (per-draw hyperparameters, conjugate predictive per draw; GPD's
``mean`` dims are checked on its exact fit). Every NUTS compilation costs tens of seconds
of CPU, and the test budget is small."""


SPARSE_VARIANTS = (("logistic_softmax", "cavi", 8),)
"""(model, method, num_inducing) cases that the method option ``num_inducing`` < N makes
sparse: the fit is then held as inducing draws (predictive kind ``"inducing"``), another
export and saving path than the same method's full fit in ``cases()``."""


HYPERPARAMETER_CASES = (("ilr_gp", "exact"), ("ilr_gp", "map"), ("dirichlet_gp_sparse", "exact"),
                        ("logistic_softmax", "cavi"))
"""(model, method) cases also fitted with their hyperparameters chosen by the method itself:
type-II ML and MAP by L-BFGS (the collapsed and the sparse bound, GPD's pseudo-observations)
and CAVI's ELBO steps."""


def cases() -> list[tuple[str, str]]:
    """The (model, method) pairs to exercise: the core models' methods (less ``SAME_PATH``),
    then each method no core model has, once, on the first registered model with it."""
    out = [(m, k) for m in CORE_MODELS for k in supported_methods(m)
           if k in METHOD_OPTIONS and (m, k) not in SAME_PATH]
    for model in available():
        for method in supported_methods(model):
            if method in METHOD_OPTIONS and method not in {k for _, k in out}:
                out.append((model, method))
    return out


@functools.lru_cache(maxsize=None)
def fitted(model: str, method: str, seed: int = 0, lengthscale_factor: float = 1.0,
           num_inducing: int | None = None, fit_hyperparameters: bool = False):
    """The cached ``FitResult`` of one case (``lengthscale_factor`` scales the given
    lengthscales: a deliberately wrong posterior for the comparison tests;
    ``num_inducing``: the method option, for ``SPARSE_VARIANTS``; ``fit_hyperparameters``:
    the method fits them, for ``HYPERPARAMETER_CASES``)."""
    X, y = toy()
    options = dict(METHOD_OPTIONS[method])
    if num_inducing is not None:
        options["num_inducing"] = num_inducing
    if method in _TAKES_HYPERPARAMETERS and not fit_hyperparameters:
        hypers = initial_hyperparameters(model)
        hypers["kernel_lengthscale"] = hypers["kernel_lengthscale"] * lengthscale_factor
        options["hyperparameters"] = hypers
    if method == "nuts" and not get_spec(model).has("conjugate"):
        options["form"] = "latent"
    return fit(model, X, y, method=method, model_options=model_options(model), seed=seed,
               **options)


def estimator_problem():
    """(X (30, 2), y (30,), X_test (10, 2)): three overlapping Gaussian classes, on which the
    golden file (``tests/data/golden``) records every estimator's defaults."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [2.5, 0.0], [0.0, 2.5]])
    y = np.repeat(np.arange(3), 10)
    X = centres[y] + rng.normal(size=(30, 2))
    return X, y, X[::3] + 0.1
