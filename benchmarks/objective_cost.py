"""One evaluation of the exact models' type-II objective and its gradient: ppgpc's collapsed
marginals (``ppgpc.gp.exact.MarginalGaussian``, and GPD's ``TwoLevelMarginalGaussian``)
against the same density written as NumPyro's ``MultivariateNormal`` on the Cholesky factor,
differentiated by JAX through the factorisation, in one run.

The table is ``make_classification`` (``--rows`` training rows, ``--columns`` columns, 16 of
them informative at most, ``--classes`` classes), standardised; the objective is the
collapsed model's negative log posterior (type-II MAP) over its constrained hyperparameters
near the model's own start (RBF-ARD kernel), over ``--repeats`` evaluations after a first
that compiles. Prints the median seconds of value and gradient, of the value alone, and the
ratio.

    python benchmarks/objective_cost.py
    python benchmarks/objective_cost.py --rows 2000 --columns 20 --classes 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpyro.distributions as dist
from sklearn.datasets import make_classification

from ppgpc.gp import exact
from ppgpc.gp.kernels import make_kernel
from ppgpc.infer.sites import log_density_terms
from ppgpc.models import dirichlet_gp, ilr_gp


def _as_reference(model):
    """``model`` with its collapsed site drawn from NumPyro's MultivariateNormal on the
    Cholesky factor (what the models used before), everything else as it is."""
    def reference(data, kernel):
        original = exact.MarginalGaussian, exact.TwoLevelMarginalGaussian

        def mvn(loc, covariance, rows=None):
            L = jnp.linalg.cholesky(covariance)
            return dist.MultivariateNormal(loc, scale_tril=L)

        def two_level(loc, K, onehot, low, high, mask=None):
            noise = jnp.where(onehot > 0, high, low)
            return mvn(loc, K + jax.vmap(jnp.diag)(noise.T))

        exact.MarginalGaussian, exact.TwoLevelMarginalGaussian = mvn, two_level
        try:
            model(data, kernel)
        finally:
            exact.MarginalGaussian, exact.TwoLevelMarginalGaussian = original
    return reference


def _median_seconds(fn, x, repeats: int) -> float:
    jax.block_until_ready(fn(x))
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(x + 1e-3 * (i + 1)))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1250)
    parser.add_argument("--columns", type=int, default=64)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    X, y = make_classification(n_samples=args.rows, n_features=args.columns,
                               n_informative=min(args.columns, 16), n_redundant=0,
                               n_classes=args.classes, n_clusters_per_class=1, random_state=0)
    X = (X - X.mean(0)) / X.std(0)
    kernel = make_kernel("rbf-ard")
    print(f"{args.rows} rows, {args.columns} columns, {args.classes} classes; median of "
          f"{args.repeats} evaluations (s)")
    print(f"{'model':14s} {'objective':26s} {'value+grad':>10s} {'value':>8s}")
    for name, module, options in (("ILR-GP", ilr_gp, dict(epsilon=0.99, tau=0.01)),
                                  ("GPD", dirichlet_gp, dict(alpha_eps=0.01))):
        data = module.prepare(X, y, args.classes, **options)
        start = module.initial_hypers(data, kernel)
        rows = {}
        for label, model in (("ppgpc (closed-form grad)", module.collapsed_model),
                             ("NumPyro MVN (autodiff)", _as_reference(module.collapsed_model))):
            x0, unravel = jax.flatten_util.ravel_pytree(
                {k: jnp.asarray(v, dtype=jnp.float64) for k, v in start.items()})

            def fun(x, model=model, data=data, unravel=unravel):
                return -log_density_terms(model, (data, kernel), unravel(x), True)
            both = _median_seconds(jax.jit(jax.value_and_grad(fun)), x0, args.repeats)
            value = _median_seconds(jax.jit(fun), x0, args.repeats)
            rows[label] = both
            print(f"{name:14s} {label:26s} {both:10.3f} {value:8.3f}", flush=True)
        ours, theirs = rows.values()
        print(f"{name:14s} {'ratio (NumPyro / ppgpc)':26s} {theirs / ours:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
