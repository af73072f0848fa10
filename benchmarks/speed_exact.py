"""Cost of exact ILR-GP hyperparameter fitting against GPD and GPyTorch, over N and C.

One optimiser step of type-II ML is one value-and-gradient of the collapsed log marginal
likelihood. ILR-GP's C-1 latents share one noise level, so a step costs one Cholesky of
K + sigma^2 I (O(N^3), forward and backward) plus O(N^2 (C-1)) for the solves (docs/math.md
section 1); GPD's noise differs per class, so it needs C Choleskys (docs/math.md section 2), and
so does GPyTorch's Dirichlet GP (``gpytorch_peer.py``, a kernel per class; conjugate
gradients above 800 points, its default, unless ``--gpytorch-cholesky``).

Data: the circle mixture (``ppgpc.datasets.synthetic.mixture_problem``, sigma 0.3, D = 2)
with N training and 1000 test points. For each (N, C), one row of:

* ``s/step``: seconds of one jitted value-and-gradient of the negative collapsed log
  marginal likelihood over the unconstrained hyperparameters, after compilation (best of
  three), for ILR (``epsilon=0.99``) and GPD (``alpha_eps=0.01``); for GPyTorch the median
  seconds of one of its Adam steps (value, gradient, update); ratios to ILR;
* ``chol%``: the share of an ILR step that one jitted Cholesky of an N x N matrix plus its
  gradient takes (the factorisation's own cost, isolated);
* ``adam fit``: ``--steps`` Adam steps (learning rate 0.1) for both, the whole fit:
  ILR through ``ppgpc.infer.fit("ilr_gp", ..., optimizer="adam")`` (hyperparameters, then
  the conjugate posterior and its draws), first call in the process (``1st``, compilation
  included; ``xla``: the seconds XLA spent compiling or loading programs from the persistent
  cache in it) and again (``warm``); GPyTorch's fit (``gpytorch_peer.fit_predict``, after a
  small warm-up fit in the process); the ratio GPyTorch / ILR warm; the test NLL of each;
* ``lbfgs fit``: the driver's exact fit, ``fit("ilr_gp", ..., method="exact")`` at
  ``epsilon=0.99`` (type-II ML by L-BFGS to convergence, then the conjugate posterior):
  seconds (first call), iterations and test NLL. This is not ``ILRGPClassifier()``'s
  default, which also chooses epsilon and tau by leave-one-out (``benchmarks/uci_exact.py``,
  ``benchmarks/speed_small.py``).

First calls read ppgpc's persistent compilation cache (``ppgpc._config``; the header names
the folder), so they depend on earlier runs; ``PPGPC_COMPILATION_CACHE=0`` turns it off and
makes ``1st`` and ``xla`` a real compilation every time.

    PPGPC_COMPILATION_CACHE=0 python benchmarks/speed_exact.py
    python benchmarks/speed_exact.py --sizes 1000 --classes 5 --models ilr gpytorch
    python benchmarks/speed_exact.py --sizes 200 --classes 3 --steps 20
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions.transforms import biject_to
from numpyro.handlers import seed, trace

import ppgpc.runtime  # noqa: F401  (float64: ppgpc's JAX code sets it)
from ppgpc.datasets.synthetic import mixture_problem
from ppgpc.evaluation import metrics
from ppgpc.experiments import print_table_header
from ppgpc.gp import linalg
from ppgpc.gp.kernels import make_kernel
from ppgpc.infer import fit
from ppgpc.infer.sites import log_density_terms
from ppgpc.models import get_spec

MODELS = ("ilr", "gpd", "gpytorch")
SIGMA = 0.3
N_TEST = 1000
_SPECS = {"ilr": ("ilr_gp", {"epsilon": 0.99}), "gpd": ("dirichlet_gp", {"alpha_eps": 0.01})}
_BUILD_EVENT = "/jax/core/compile/backend_compile_duration"


class _XlaSeconds:
    """Running sum of the seconds JAX spends building executables (compiling, or reading
    them from the persistent cache): the ``backend_compile_duration`` events."""

    def __init__(self):
        self.total = 0.0
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        if event == _BUILD_EVENT:
            self.total += duration


XLA_SECONDS = _XlaSeconds()


def _best_of(fn, *args, repeats: int = 3) -> float:
    jax.block_until_ready(fn(*args))  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def collapsed_step(model: str, X, y, num_classes: int):
    """(value_and_grad, u0, args): the jitted value and gradient of the negative collapsed
    log marginal likelihood (no priors) over the unconstrained hyperparameters, its start
    (the model's initial hyperparameters) and its other argument, ``(data, kernel)``."""
    spec_name, options = _SPECS[model]
    spec = get_spec(spec_name)
    kernel = make_kernel("rbf-ard")
    data = spec.prepare(X, y, num_classes, **options)
    args = (data, kernel)
    supports = {}

    def record_supports(args):  # an abstract trace: nothing N x N is computed
        tr = trace(seed(spec.conjugate.collapsed_model, 0)).get_trace(*args)
        supports.update({name: site["fn"].support for name, site in tr.items()
                         if site["type"] == "sample" and not site["is_observed"]})

    jax.eval_shape(record_supports, args)
    transforms = {name: biject_to(support) for name, support in supports.items()}

    def negative_log_ml(u, args):
        params = {name: transforms[name](value) for name, value in u.items()}
        return -log_density_terms(spec.conjugate.collapsed_model, args, params, False)

    init = spec.initial_hypers(data, kernel)
    u0 = {name: transforms[name].inv(jnp.asarray(value, dtype=jnp.float64))
          for name, value in init.items()}
    return jax.jit(jax.value_and_grad(negative_log_ml)), u0, args


def step_seconds(model: str, problem) -> float:
    step, u0, args = collapsed_step(model, problem.X_train, problem.y_train,
                                    problem.num_classes)
    return _best_of(step, u0, args)


def cholesky_seconds(n: int) -> float:
    A = jnp.asarray(np.cov(np.random.default_rng(1).normal(size=(n, n + 5)))) + jnp.eye(n)
    chol_and_grad = jax.jit(jax.value_and_grad(
        lambda A: linalg.logdet(linalg.cholesky(A).factor)))
    return _best_of(chol_and_grad, A)


def ilr_fit(problem, **options) -> dict:
    """Seconds, XLA seconds, iterations and test NLL of ``fit("ilr_gp", ...)``."""
    xla = XLA_SECONDS.total
    start = time.perf_counter()
    result = fit("ilr_gp", problem.X_train, problem.y_train, method="exact",
                 num_classes=problem.num_classes, model_options={"epsilon": 0.99}, **options)
    seconds, xla = time.perf_counter() - start, XLA_SECONDS.total - xla
    probs = result.predict_proba(problem.X_test)
    return {"s": seconds, "xla": xla,
            "iters": result.info.optimizer and result.info.optimizer.iterations,
            "nll": metrics.nll(probs, problem.y_test)}


def measure(n: int, num_classes: int, steps: int, models, gpytorch_options: dict) -> dict:
    problem = mixture_problem(n, N_TEST, num_classes, SIGMA, seed=0)
    row = {}
    if "ilr" in models:
        row["ilr_step"] = step_seconds("ilr", problem)
        row["chol"] = cholesky_seconds(n)
    if "gpd" in models:
        row["gpd_step"] = step_seconds("gpd", problem)
    if "gpytorch" in models:
        from gpytorch_peer import fit_predict

        probs, fit_s, per_step = fit_predict(problem.X_train, problem.y_train, problem.X_test,
                                             steps=steps, **gpytorch_options)
        row.update(gpyt_step=per_step, gpyt_fit=fit_s,
                   gpyt_nll=metrics.nll(probs, problem.y_test))
    if "ilr" in models:
        adam = {"optimizer": "adam", "max_iter": steps, "learning_rate": 0.1}
        first = ilr_fit(problem, **adam)
        row.update(adam_first=first["s"], adam_xla=first["xla"], adam_nll=first["nll"],
                   adam_warm=ilr_fit(problem, **adam)["s"])
        lbfgs = ilr_fit(problem)
        row.update(lbfgs=lbfgs["s"], lbfgs_iters=lbfgs["iters"], lbfgs_nll=lbfgs["nll"])
    return row


def _f(row: dict, key: str, width: int, fmt: str) -> str:
    value = row.get(key)
    if value is None:
        return f"{'-':>{width}s}"
    return f"{int(value) if fmt == 'd' else value:>{width}{fmt}}"


def _ratio(row: dict, top: str, bottom: str, width: int = 6) -> str:
    if row.get(top) is None or not row.get(bottom):
        return f"{'-':>{width}s}"
    return f"{row[top] / row[bottom]:>{width}.1f}"


def _format_row(n: int, c: int, r: dict) -> str:
    chol = (f"{100 * min(r['chol'] / r['ilr_step'], 1.0):5.0f}%" if "chol" in r
            else f"{'-':>6s}")
    return " ".join([
        f"{n:6d} {c:3d} |", _f(r, "ilr_step", 8, ".4f"), chol,
        _f(r, "gpd_step", 8, ".4f"), _ratio(r, "gpd_step", "ilr_step"),
        _f(r, "gpyt_step", 8, ".4f"), _ratio(r, "gpyt_step", "ilr_step"), "|",
        _f(r, "adam_first", 7, ".2f"), _f(r, "adam_xla", 5, ".1f"),
        _f(r, "adam_warm", 7, ".2f"), _f(r, "adam_nll", 6, ".3f"),
        _f(r, "gpyt_fit", 7, ".2f"), _f(r, "gpyt_nll", 6, ".3f"),
        _ratio(r, "gpyt_fit", "adam_warm"), "|",
        _f(r, "lbfgs", 7, ".2f"), _f(r, "lbfgs_iters", 5, "d"), _f(r, "lbfgs_nll", 6, ".3f"),
    ])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--classes", type=int, nargs="+", default=[5, 10])
    parser.add_argument("--steps", type=int, default=100, help="Adam steps of both fits")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--gpytorch-cholesky", action="store_true",
                        help="GPyTorch by Cholesky at every N (default: CG above 800 points)")
    args = parser.parse_args(argv)
    models = set(args.models)
    # GPyTorch's note on each jitter it adds to a Cholesky would bury the table
    warnings.filterwarnings("ignore", message="A not p.d., added jitter")
    gpytorch_options = {"standardize": False}  # the mixture is on a unit scale already
    if args.gpytorch_cholesky:
        gpytorch_options["max_cholesky_size"] = max(args.sizes) + 1
    if "gpytorch" in models:
        from gpytorch_peer import AVAILABLE, UNAVAILABLE_NOTE, fit_predict

        if AVAILABLE:  # torch's one-off start-up cost stays out of the first row
            warm = mixture_problem(50, 10, 3, SIGMA, seed=1)
            fit_predict(warm.X_train, warm.y_train, warm.X_test, steps=2, **gpytorch_options)
        else:
            print(UNAVAILABLE_NOTE)
            models.discard("gpytorch")

    print(f"type-II ML, RBF-ARD, circle mixture (sigma {SIGMA}, D = 2, {N_TEST} test points); "
          f"{jax.devices()[0].platform}; Adam fits: {args.steps} steps, learning rate 0.1; "
          f"GPyTorch: {'Cholesky' if args.gpytorch_cholesky else 'its defaults (CG above 800)'}; "
          f"compilation cache: {jax.config.jax_compilation_cache_dir or 'off'}")
    print(f"{'':10s} | {'seconds per step (xN: N / ILR)':^47s} | "
          f"{'Adam fits: seconds, test NLL':^56s} | {'ILR L-BFGS':^20s}")
    print_table_header(
        f"{'N':>6s} {'C':>3s} | {'ILR':>8s} {'chol%':>6s} {'GPD':>8s} {'xGPD':>6s} "
        f"{'GPyT':>8s} {'xGPyT':>6s} | {'ILR 1st':>7s} {'xla':>5s} {'warm':>7s} {'NLL':>6s} "
        f"{'GPyT':>7s} {'NLL':>6s} {'xGPyT':>6s} | {'s':>7s} {'iters':>5s} {'NLL':>6s}")
    for n in args.sizes:
        for c in args.classes:
            row = measure(n, c, args.steps, models, gpytorch_options)
            print(_format_row(n, c, row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
