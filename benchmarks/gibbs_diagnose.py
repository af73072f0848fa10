"""Where the logistic-softmax Gibbs sampler's time and mixing go (issue 40; docs/records/gibbs.md).

On ``speed_gibbs_ess.py``'s problem (Gaussian blobs, RBF variance 4, lengthscale 1, fixed
hyperparameters), for three sweeps built from the blocks of
``ppgpc.models.logistic_softmax.gibbs``:

* ``uncollapsed``: the sweep before issue 40, lambda_i | n_i ~ Gamma(1 + sum_c n_ic, rate C)
  from the previous sweep's counts, then n, omega, f;
* ``collapsed``: (lambda, n) | f jointly (``lambda_count_block``), then omega, f;
* ``default``: the library's sweep, the level move (``level_block``) before the collapsed
  blocks.

it prints (``--part cost``) milliseconds per call of each block, all chains vmapped, best of
``--repeats`` runs of 20 calls, and (``--part ess``) the minimum and median bulk ESS and the
largest R-hat over the entries of each block (f, lambda, n, omega) and of derived
directions: the class-mean level m_i = mean_c f_ic, the contrasts f_ic - m_i, sum_c n_ic,
and log(lambda_i sum_c sigma(f_ic)) (lambda against its conditional scale given f), from
``--chains`` chains of ``--samples`` sweeps after ``--warmup``, timed inside one compiled
``lax.scan``. ``--nuts`` adds NUTS's ESS of f, of the level and of the contrasts.

    python benchmarks/gibbs_diagnose.py --part cost ess --sizes 200 --classes 3 --nuts
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np

import ppgpc.runtime  # noqa: F401  (float64: ppgpc's JAX code sets it)
from ppgpc.gp import linalg
from ppgpc.gp.kernels import RBF, gram, kernel_params
from ppgpc.models import logistic_softmax as lsm
from ppgpc.models.logistic_softmax import gibbs as lsm_gibbs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from speed_gibbs_ess import HYPERS, _nuts, blobs  # noqa: E402

__all__ = ["sweeps", "block_costs", "block_mixing"]

SWEEPS = ("uncollapsed", "collapsed", "default")


def sweeps(data):
    """The three sweeps as ``step(key, (f, lam, n, omega)) -> (f, lam, n, omega)`` and the
    factors they share."""
    Y = data.onehot
    N, C = Y.shape
    K = gram(RBF(ard=False), kernel_params(HYPERS), data.X)
    L = linalg.cholesky(K).factor

    def tail(keys, f, lam, n):
        omega = lsm_gibbs.omega_block(keys[0], Y, n, f)
        return lsm_gibbs.f_block(keys[1], K, L, omega, 0.5 * (Y - n)), lam, n, omega

    def uncollapsed(key, state):
        f, _, n, _ = state
        k = jax.random.split(key, 4)
        lam = jax.random.gamma(k[0], 1.0 + jnp.sum(n, axis=1)) / C
        n = jax.random.poisson(k[1], lam[:, None] * jax.nn.sigmoid(-f), (N, C)).astype(f.dtype)
        return tail(k[2:], f, lam, n)

    def collapsed(key, state):
        k = jax.random.split(key, 3)
        lam, n = lsm_gibbs.lambda_count_block(k[0], state[0])
        return tail(k[1:], state[0], lam, n)

    def default(key, state):
        k = jax.random.split(key, 4)
        f = lsm_gibbs.level_block(k[0], state[0], L, Y)
        lam, n = lsm_gibbs.lambda_count_block(k[1], f)
        return tail(k[2:], f, lam, n)

    return {"uncollapsed": uncollapsed, "collapsed": collapsed, "default": default}, K, L


def _start(key, L, chains, C):
    N = L.shape[0]
    f = jnp.einsum("nm,bmc->bnc", L, jax.random.normal(key, (chains, N, C)))
    return f, jnp.ones((chains, N)), jnp.zeros((chains, N, C)), jnp.zeros((chains, N, C))


def _run(step, key, state, num, chains):
    def body(s, k):
        s = jax.vmap(step)(jax.random.split(k, chains), s)
        return s, s
    return jax.lax.scan(body, state, jax.random.split(key, num))


def block_costs(data, chains, repeats, key):
    """Milliseconds per call of each block (all chains), best of ``repeats`` x 20 calls."""
    steps, K, L = sweeps(data)
    default = steps["default"]
    Y = data.onehot
    C = Y.shape[1]
    run = jax.jit(_run, static_argnums=(0, 3, 4))
    state, _ = run(default, jax.random.fold_in(key, 0), _start(key, L, chains, C), 100, chains)
    f, lam, n, omega = state
    V = jax.vmap
    blocks = {
        "level (3 slice steps)": lambda k: V(lambda kk, ff: lsm_gibbs.level_block(kk, ff, L, Y))(
            jax.random.split(k, chains), f),
        "lambda, n | f": lambda k: V(lsm_gibbs.lambda_count_block)(jax.random.split(k, chains), f),
        "omega (Polya-Gamma)": lambda k: V(lambda kk, nn, ff: lsm_gibbs.omega_block(kk, Y, nn, ff))(
            jax.random.split(k, chains), n, f),
        "f (C Choleskys)": lambda k: V(lambda kk, o, nn: lsm_gibbs.f_block(kk, K, L, o, 0.5 * (Y - nn)))(
            jax.random.split(k, chains), omega, n),
        "whole default sweep": lambda k: V(default)(jax.random.split(k, chains), state),
    }
    out = {}
    for name, fn in blocks.items():
        fn = jax.jit(fn)
        jax.block_until_ready(fn(key))
        best = np.inf
        for r in range(repeats):
            t = time.perf_counter()
            for i in range(20):
                res = fn(jax.random.fold_in(key, 20 * r + i))
            jax.block_until_ready(res)
            best = min(best, (time.perf_counter() - t) / 20)
        out[name] = 1e3 * best
    return out


def _summary(draws):
    ds = az.convert_to_dataset({"x": draws})
    ess = np.asarray(az.ess(ds)["x"]).ravel()
    rhat = np.asarray(az.rhat(ds)["x"]).ravel()
    return ess.min(), np.median(ess), rhat.max()


def _directions(f, lam=None, n=None, omega=None):
    """Draws (chain, draw, ...) of each block and derived direction."""
    level = f.mean(-1)
    out = {"f": f, "level mean_c f": level, "contrasts f - level": f - level[..., None]}
    if lam is not None:
        sig = 1.0 / (1.0 + np.exp(-f))
        out.update({"lambda": lam, "log(lambda sum sig(f))": np.log(lam * sig.sum(-1)),
                    "n": n, "sum_c n": n.sum(-1), "omega": omega})
    return out


def block_mixing(data, name, chains, warmup, samples, key):
    """Seconds of ``samples`` sweeps and {direction: (min ESS, median ESS, max R-hat)}."""
    steps, _, L = sweeps(data)
    run = jax.jit(_run, static_argnums=(0, 3, 4))
    state = _start(key, L, chains, data.num_classes)
    state, _ = run(steps[name], jax.random.fold_in(key, 1), state, warmup, chains)
    jax.block_until_ready(state)
    k_draws = jax.random.fold_in(key, 2)
    sample = run.lower(steps[name], k_draws, state, samples, chains).compile()  # off the clock
    t = time.perf_counter()
    _, draws = sample(k_draws, state)
    jax.block_until_ready(draws)
    secs = time.perf_counter() - t
    draws = [np.swapaxes(np.asarray(d), 0, 1) for d in draws]      # (chain, draw, ...)
    return secs, {k: _summary(v) for k, v in _directions(*draws).items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", nargs="+", choices=["cost", "ess"], default=["cost", "ess"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[200])
    parser.add_argument("--classes", nargs="+", type=int, default=[3])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sweeps", nargs="+", choices=SWEEPS, default=list(SWEEPS))
    parser.add_argument("--nuts", action="store_true", help="NUTS's ESS of f, level, contrasts")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    root = jax.random.PRNGKey(args.seed)
    for N in args.sizes:
        for C in args.classes:
            X, y = blobs(N, C, args.seed)
            data = lsm.prepare(X, y, C)
            key = jax.random.fold_in(jax.random.fold_in(root, N), C)
            print(f"## N = {N}, C = {C}, {args.chains} chains", flush=True)
            if "cost" in args.part:
                for name, ms in block_costs(data, args.chains, args.repeats, key).items():
                    print(f"cost  {name:24s} {ms:8.2f} ms", flush=True)
            if "ess" not in args.part:
                continue
            print(f"{'sweep':12s} {'direction':24s} {'minESS':>7} {'medESS':>7} {'maxRhat':>7}"
                  f"  ({args.samples} draws x {args.chains} chains after {args.warmup})")
            for name in args.sweeps:
                secs, rows = block_mixing(data, name, args.chains, args.warmup, args.samples,
                                          key)
                print(f"{name:12s} {'seconds':24s} {secs:7.2f}  "
                      f"({1e3 * secs / args.samples:.1f} ms/sweep)", flush=True)
                for k, (lo, med, rh) in rows.items():
                    print(f"{name:12s} {k:24s} {lo:7.0f} {med:7.0f} {rh:7.3f}", flush=True)
            if args.nuts:
                hypers = {k: jnp.asarray(v) for k, v in HYPERS.items()}
                draws, secs = _nuts(data, hypers, args.chains, 300, args.samples, args.seed)
                print(f"{'nuts':12s} {'seconds':24s} {secs:7.2f}", flush=True)
                for k, (lo, med, rh) in {k: _summary(v)
                                         for k, v in _directions(draws).items()}.items():
                    print(f"{'nuts':12s} {k:24s} {lo:7.0f} {med:7.0f} {rh:7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
