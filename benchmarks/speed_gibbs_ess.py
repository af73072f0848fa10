"""Part (b) of the Gibbs speed benchmark: effective samples per second of the latent f for the
logistic-softmax blocked Gibbs sampler (docs/math.md section 3) against NUTS on the same
(non-augmented) posterior, with the same fixed kernel hyperparameters.

For each (N, C): Gaussian blobs in 2-D, RBF kernel (variance 4, lengthscale 1). Every sampler
runs ``chains`` chains (4 by default) after its warm-up; the clock covers the sampling phase
only (Gibbs: compiled first; NUTS: one compiled transition after ``MCMC.warmup``, compiled
on a first transition off the clock). ESS is ArviZ's bulk ESS of every f_ic; the table shows its
minimum and median per second, the largest R-hat over the f_ic, and the ratio of Gibbs's minimum ESS
per second to NUTS's (issue 40 asks for at least 1 at N = 200 and 3 at N = 1000, with R-hat
at most 1.01). Both samplers get the Cholesky factor of K precomputed (NUTS runs on
v with f^c = chol(K) v^c and the plain likelihood, so a gradient costs O(N^2 C), not a
factorisation). NUTS is expensive at N = 1000 (C = 10 is 10 000 dimensions), so it gets its
own, smaller, warm-up and draw counts (``--nuts-warmup``, ``--nuts-samples``); the output
states the counts used, and ESS per second is comparable across different counts.

    python benchmarks/speed_gibbs_ess.py                     # N in {200, 1000}, C in {3, 10}
    python benchmarks/speed_gibbs_ess.py --sizes 200 --classes 3 --samples 500

``speed_gibbs.py`` (part (a), Polya-Gamma draws per second) can call ``ess_table``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np

import ppgpc.runtime  # noqa: F401  (float64: ppgpc's JAX code sets it)
from ppgpc.gp.kernels import RBF
from ppgpc.models import logistic_softmax as lsm
from ppgpc.models.logistic_softmax import gibbs as lsm_gibbs

__all__ = ["ess_table", "blobs"]

HYPERS = {"kernel_variance": 4.0, "kernel_lengthscale": 1.0}


def blobs(n: int, num_classes: int, seed: int = 0):
    """Overlapping Gaussian blobs on a circle: X (n, 2), y (n,)."""
    gen = np.random.default_rng(seed)
    y = np.arange(n) % num_classes
    angles = 2 * np.pi * y / num_classes
    centres = 2.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return centres + 0.8 * gen.normal(size=(n, 2)), y


def _ess(draws: np.ndarray) -> np.ndarray:
    """Bulk ESS of every coordinate of (chain, draw, N, C) draws."""
    return np.asarray(az.ess(az.convert_to_dataset({"f": draws}))["f"]).ravel()


def _rhat(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat of every coordinate of (chain, draw, N, C) draws."""
    return np.asarray(az.rhat(az.convert_to_dataset({"f": draws}))["f"]).ravel()


def _gibbs(data, hypers, chains, warmup, samples, seed):
    init, step = lsm_gibbs.gibbs_kernel(data, RBF(ard=False), hypers)
    keys = jax.random.split(jax.random.PRNGKey(seed), chains)
    state = jax.vmap(init)(keys)
    sweep = jax.jit(jax.vmap(lambda k, s: step(k, s)[0]))
    key = jax.random.PRNGKey(seed + 1)
    for i in range(warmup):  # includes the compile
        state = sweep(jax.random.split(jax.random.fold_in(key, i), chains), state)
    jax.block_until_ready(state)
    start = time.perf_counter()
    out = []
    for i in range(samples):
        state = sweep(jax.random.split(jax.random.fold_in(key, warmup + i), chains), state)
        out.append(state.f)
    draws = np.asarray(jnp.stack(out, axis=1))
    return draws, time.perf_counter() - start


def _whitened_model(chol_K, y, num_classes):
    """The plain logistic-softmax posterior of ``lsm.latent_model`` with chol(K) given."""
    import numpyro
    import numpyro.distributions as dist

    N = chol_K.shape[0]
    with numpyro.plate("latent", num_classes, dim=-1):
        v = numpyro.sample("f_white", dist.Normal(jnp.zeros(N), 1.0).to_event(1))
    f = numpyro.deterministic("f", chol_K @ v.T)
    numpyro.sample("y", dist.Categorical(logits=lsm.log_link(f)).to_event(1), obs=y)


def _nuts(data, hypers, chains, warmup, samples, seed):
    from numpyro.infer import MCMC, NUTS

    from ppgpc.gp import linalg
    from ppgpc.gp.kernels import gram

    params = {"variance": hypers["kernel_variance"], "lengthscale": hypers["kernel_lengthscale"]}
    chol_K = linalg.cholesky(gram(RBF(ard=False), params, data.X)).factor
    model = functools.partial(_whitened_model, chol_K, data.y, data.num_classes)
    kernel = NUTS(model)
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=samples, num_chains=chains,
                chain_method="vectorized", progress_bar=False)
    mcmc.warmup(jax.random.PRNGKey(seed))  # adapted step size and mass matrix, per chain
    # The sampling phase as for Gibbs: one compiled transition (NUTS vmaps it over the
    # vectorised chains itself), compiled on a first transition outside the clock, then
    # timed draw by draw.
    transition = jax.jit(lambda s: kernel.sample(s, (), {}))
    state = transition(mcmc.last_state)
    jax.block_until_ready(state)
    start = time.perf_counter()
    out = []
    for _ in range(samples):
        state = transition(state)
        out.append(state.z["f_white"])                              # (chains, C, N)
    v = jnp.stack(out, axis=1) if chains > 1 else jnp.stack(out)[None]   # (chains, S, C, N)
    v = np.asarray(v)
    secs = time.perf_counter() - start
    return np.einsum("nk,sdck->sdnc", np.asarray(chol_K), v), secs


def ess_table(sizes=(200, 1000), classes=(3, 10), *, chains=4, warmup=200, samples=500,
              nuts_warmup=300, nuts_samples=None, seed=0, samplers=("gibbs", "nuts"),
              file=sys.stdout):
    """Print min and median bulk ESS per second of f, and the largest R-hat, for each
    sampler and (N, C); the last column is min ESS/s over NUTS's (when NUTS ran first or
    before in ``samplers``, else blank).

    ``nuts_samples`` (default: ``samples``) draws per chain for NUTS after ``nuts_warmup``.
    """
    nuts_samples = samples if nuts_samples is None else nuts_samples
    print(f"# {chains} chains; Gibbs: {warmup} warm-up sweeps + {samples} draws; NUTS: "
          f"{nuts_warmup} warm-up + {nuts_samples} draws (modest counts: NUTS at N = 1000, "
          f"C = 10 samples 10 000 dimensions); clock = sampling phase only",
          file=file, flush=True)
    print(f"{'N':>5} {'C':>3} {'sampler':8s} {'seconds':>8} {'minESS':>8} {'medESS':>8} "
          f"{'minESS/s':>9} {'medESS/s':>9} {'maxRhat':>8} {'vsNUTS':>7}", file=file, flush=True)
    rows = []
    for n in sizes:
        for c in classes:
            X, y = blobs(n, c, seed)
            data = lsm.prepare(X, y, c)
            hypers = {k: jnp.asarray(v) for k, v in HYPERS.items()}
            nuts_rate = None
            for name in sorted(samplers, key=lambda s: s != "nuts"):
                if name == "nuts":
                    draws, secs = _nuts(data, hypers, chains, nuts_warmup, nuts_samples, seed)
                elif name == "gibbs":
                    draws, secs = _gibbs(data, hypers, chains, warmup, samples, seed)
                else:
                    raise ValueError(f"unknown sampler {name!r}: 'gibbs' or 'nuts'")
                ess = _ess(draws)
                row = (n, c, name, secs, ess.min(), np.median(ess), _rhat(draws).max())
                rows.append(row)
                nuts_rate = row[4] / secs if name == "nuts" else nuts_rate
                ratio = "" if nuts_rate is None else f"{row[4] / secs / nuts_rate:7.3f}"
                print(f"{n:5d} {c:3d} {name:8s} {secs:8.1f} {row[4]:8.0f} {row[5]:8.0f} "
                      f"{row[4] / secs:9.1f} {row[5] / secs:9.1f} {row[6]:8.3f} {ratio:>7}",
                      file=file, flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[200, 1000])
    parser.add_argument("--classes", nargs="+", type=int, default=[3, 10])
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--nuts-warmup", type=int, default=300)
    parser.add_argument("--nuts-samples", type=int, default=None,
                        help="NUTS draws per chain (default: --samples)")
    parser.add_argument("--samplers", nargs="+", default=["gibbs", "nuts"])
    args = parser.parse_args(argv)
    ess_table(args.sizes, args.classes, chains=args.chains, warmup=args.warmup,
              samples=args.samples, nuts_warmup=args.nuts_warmup,
              nuts_samples=args.nuts_samples, samplers=args.samplers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
