"""When does GPD break down? The ILR paper's Table 1: single-sample predictions from the
latent predictive versus the noisy pseudo-observation, GPD against Exact-ILR.

Data: C well-separated 2-D Gaussian classes with means evenly on a circle (spacing ten
standard deviations), ``--per-class`` training points and 100 test points per class. Both
models are fitted exactly (type-II ML). A class is predicted from ONE Monte Carlo draw:

* GPD, latent:  argmax_c softmax(f*)_c,  f* ~ N(mu, var)            (``predict_from="latent"``)
* GPD, noisy:   the same with f* ~ N(mu, var + s2), s2 the log-normal noise of the label the
  latent mean predicts (``predict_from="noisy"``; ``models/dirichlet_gp.py``)
* ILR, latent:  argmax softmax(V z*), z* ~ N(mu, var I);  ILR, noisy: z* ~ N(mu, (var + sigma^2) I)

The error is averaged over ``--repeats`` independent draws per test point. Expected (paper):
no error from the latent predictive for either model; avoidable errors for GPD's noisy
predictive, growing with C and shrinking with alpha_eps; none for ILR (Proposition 1).

    python benchmarks/gpd_breakdown.py
    python benchmarks/gpd_breakdown.py --classes 3 10 --alpha-eps 0.01 0.1
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import ppgpc.runtime  # noqa: F401  (float64: ppgpc's JAX code sets it)
from ppgpc.experiments import print_table_header
from ppgpc.gp import simplex
from ppgpc.infer import fit
from ppgpc.models import dirichlet_gp


def _blobs(num_classes: int, per_class: int, seed: int):
    gen = np.random.default_rng(seed)
    sd = 0.3
    radius = 10 * sd * num_classes / (2 * np.pi)  # arc spacing ~ 10 sd
    y = np.repeat(np.arange(num_classes), per_class)
    angle = 2 * np.pi * y / num_classes
    X = radius * np.stack([np.cos(angle), np.sin(angle)], 1) + sd * gen.normal(size=(len(y), 2))
    return X / radius, y  # unit circle, so one lengthscale prior suits every C


def _single_draw_error(key, mean, var, labels, link, repeats):
    f = mean[None] + jnp.sqrt(var)[None] * jax.random.normal(key, (repeats,) + mean.shape)
    pred = jnp.argmax(link(f), axis=-1)
    return float(jnp.mean(pred != labels[None]))


def _predictive(result, Xs, options=None):
    hypers = {k: v[0, 0] for k, v in result.hypers.items()}
    data = result.data if options is None else result.data._replace(options=options)
    post = result.spec.conjugate.condition(data, result.kernel, hypers)
    return result.spec.conjugate.predict(data, result.kernel, hypers, post, jnp.asarray(Xs))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[3, 5, 10, 20])
    parser.add_argument("--alpha-eps", type=float, nargs="+", default=[0.01, 0.1])
    parser.add_argument("--epsilon", type=float, default=0.999, help="ILR label smoothing")
    parser.add_argument("--per-class", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    print(f"single-sample test error; {args.per_class} training and 100 test points per class; "
          f"{args.repeats} draws per test point")
    header = f"{'C':>3s} {'model':22s} {'latent':>8s} {'noisy':>8s} {'fit s':>7s}"
    print_table_header(header)
    for C in args.classes:
        X, y = _blobs(C, args.per_class, args.seed)
        Xt, yt = _blobs(C, 100, args.seed + 1)
        labels = jnp.asarray(yt)
        key = jax.random.PRNGKey(args.seed)
        for alpha in args.alpha_eps:
            start = time.perf_counter()
            res = fit("dirichlet_gp", X, y, num_classes=C, num_draws=1, max_iter=200,
                      model_options={"alpha_eps": alpha})
            seconds = time.perf_counter() - start
            errors = []
            for i, mode in enumerate(("latent", "noisy")):
                mean, var = _predictive(res, Xt, dirichlet_gp.GPDOptions(True, mode))
                errors.append(_single_draw_error(jax.random.fold_in(key, i), mean, var, labels,
                                                 dirichlet_gp.log_link, args.repeats))
            print(f"{C:3d} {f'GPD alpha_eps={alpha:g}':22s} {errors[0]:8.4f} {errors[1]:8.4f} "
                  f"{seconds:7.1f}", flush=True)
        start = time.perf_counter()
        res = fit("ilr_gp", X, y, num_classes=C, num_draws=1, max_iter=200,
                  model_options={"epsilon": args.epsilon})
        seconds = time.perf_counter() - start
        mean, var = _predictive(res, Xt)
        errors = [_single_draw_error(jax.random.fold_in(key, 2 + i), mean, var + extra, labels,
                                     simplex.ilr_log_inverse, args.repeats)
                  for i, extra in enumerate((0.0, res.data.noise_var))]
        print(f"{C:3d} {f'ILR epsilon={args.epsilon:g}':22s} {errors[0]:8.4f} {errors[1]:8.4f} "
              f"{seconds:7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
