"""Other samplers on the posterior of ``benchmarks/nuts_ess_rate.py``: ppgpc's NUTS against
elliptical slice sampling and BlackJAX's adjusted MCLMC (MAMS), side by side in one process.

The posterior (``nuts_ess_rate.problem`` and ``nuts_ess_rate.prior_factor``): the
logistic-softmax GP's latent f_c = L v_c, L = chol(K + 1e-8 I) of a fixed RBF kernel
(variance 2, lengthscale 2), v_c ~ N(0, I_N), N = 200, C = 3, y_i ~ Categorical with
p(y = k | f) = sigma(f_k) / sum_c sigma(f_c) (``link.log_link``). Four chains per sampler,
1,000 kept draws per chain (``--draws``).

Rows:

* ``ppgpc NUTS default`` and ``ppgpc NUTS 1000 draws``: ``fit("logistic_softmax", ...,
  method="nuts", form="latent")`` with the kernel given, exactly as ``nuts_ess_rate.py``
  runs it (the default stops when its check passes; the other keeps 1,000 draws), the
  default warm-up (at most 500 transitions, ended once its adaptation has settled). Its
  warm-up seconds run from the call to the end of the last warm-up window (data
  preparation, initialisation and the step-size search included), its sampling seconds the
  rest of the call; gradient evaluations the sum of ``n_steps``
  (``nuts_ess_rate.counting``).
* ``elliptical slice``: ``ppgpc.models.logistic_softmax.elliptical_slice.elliptical_slice``
  on f (N, C) with the prior N(0, K) per class (a prior draw is L e, e ~ N(0, I)) and the
  likelihood sum_i log p(y_i | f_i); the four chains vmapped in one program, started at
  prior draws; ``--ess-burn`` steps discarded (the warm-up column: it has no tuning), then
  ``--ess-thin`` steps per kept draw. Its evaluations are likelihood evaluations (a step
  evaluates the likelihood at x, at the first proposal and at every shrunk proposal; each
  step also draws once from the prior, an N x N by N x C product, which costs more than a
  likelihood evaluation here), as ``elliptical_slice`` counts them.
* ``MAMS``: ``blackjax.adjusted_mclmc`` (the fixed-length kernel: ``ceil(L / step_size)``
  isokinetic McLachlan steps per transition, the same for all chains, so that the vmapped
  chains run in lockstep) on v (N C,) with the standard-normal prior, tuned by
  ``blackjax.adjusted_mclmc_find_L_and_step_size`` with its documented settings: target
  acceptance 0.9 (BlackJAX's MAMS recipe), ``frac_tune1 = frac_tune2 = 0.1``,
  ``frac_tune3 = 0``, diagonal preconditioning, ``target_num_integration_steps = 2``
  (BlackJAX 1.7.1's default: L = 2 step sizes), ``num_steps`` the transitions that follow
  (draws x ``--mams-thin``); each chain tunes on its own (vmapped) from a prior draw, and
  the chains then share the mean of their step sizes, L and inverse mass matrices. Then
  ``--mams-thin`` transitions per kept draw. Gradient evaluations: two per integration step
  (McLachlan's two force evaluations), tuning included. ``--mams-steps K`` adds a row with
  ``target_num_integration_steps = K`` (a longer trajectory).
* ``nutpie`` and ``nutpie low_rank`` (``--rows nutpie``): ``nuts_ess_rate.nutpie_rows``;
  its seconds are warm-up and draws together (printed under sampling).

Every row but nutpie's runs once with another seed first (``seed + 1000``), so that its
seconds count no compilation; the compiling run's seconds are printed apart. ESS and R-hat
are ArviZ's (``nuts_ess_rate.min_bulk_ess``, ``max_rhat``: the smallest bulk ESS and the
largest rank-normalised R-hat over the N C entries of f).

    python benchmarks/sampler_trial.py --seeds 2 3
    python benchmarks/sampler_trial.py --seeds 2 --rows ess mams --mams-thin 1 --mams-steps 8

Defaults: 1,000 draws; elliptical slice 5,000 burn-in steps and 10 steps a draw; MAMS 2
transitions a draw (1 left R-hat at 1.016 on seeds 2 and 3; docs/records/samplers.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nuts_ess_rate as bench

MAMS_TARGET_ACCEPT = 0.9
"""BlackJAX's target acceptance rate for MAMS."""

def _row(label, warmup_s, sampling_s, compile_s, f, evaluations, kind, note=""):
    ess = bench.min_bulk_ess(f)
    return {"label": label, "warmup": warmup_s, "sampling": sampling_s, "compile": compile_s,
            "draws": np.asarray(f).shape[1], "ess": ess, "rate": ess / sampling_s,
            "rate_all": ess / (warmup_s + sampling_s), "rhat": bench.max_rhat(f),
            "evaluations": evaluations, "kind": kind, "note": note}


# ------------------------------------------------------------------ (a) ppgpc's NUTS
def nuts_rows(X, y, seed, draws):
    from ppgpc.infer import fit, mcmc

    hypers = {"kernel_variance": bench.VARIANCE, "kernel_lengthscale": bench.LENGTHSCALE}
    rows = []
    for label, options in (("ppgpc NUTS default", {}),
                           (f"ppgpc NUTS {draws} draws",
                            {"num_samples": draws, "max_samples": draws})):
        kwargs = dict(method="nuts", form="latent", kernel="rbf", hyperparameters=hypers,
                      progress_bar=False, **options)

        def run(s, kwargs=kwargs):
            bench.WINDOW_ENDS[:] = [time.perf_counter()]
            return fit("logistic_softmax", X, y, seed=s, **kwargs)

        start = time.perf_counter()
        run(seed + 1000)
        compile_s = time.perf_counter() - start
        bench.GRADIENTS[0] = 0
        result = run(seed)
        ends = bench.WINDOW_ENDS
        total = time.perf_counter() - ends[0]
        # the warm-up's windows: it ends once the adaptation has settled (ppgpc.infer.mcmc)
        warmup_s = ends[result.info.sampler.num_warmup // mcmc.WINDOW] - ends[0]
        rows.append(_row(label, warmup_s, total - warmup_s, compile_s, result.latent,
                         bench.GRADIENTS[0], "gradients",
                         f"{result.info.sampler.num_draws} draws kept"))
    return rows


# ------------------------------------------------------------------ (b) elliptical slice
def ess_programs(L, onehot, draws, thin, burn):
    """(start, burn, sample) programs of the four chains, vmapped: ``start(keys)`` prior
    draws of f, ``burn(keys, f)`` ``burn`` steps, ``sample(keys, f)`` ``draws`` draws of
    ``thin`` steps each; the last two also return their likelihood evaluations per chain
    (``elliptical_slice``'s count)."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from ppgpc.models.logistic_softmax.elliptical_slice import elliptical_slice
    from ppgpc.models.logistic_softmax.link import log_link

    L, onehot = jnp.asarray(L), jnp.asarray(onehot)

    def prior_draw(k):
        return L @ jax.random.normal(k, onehot.shape)

    def log_lik(f):
        return jnp.sum(onehot * log_link(f))

    def steps(key, f, num):
        return elliptical_slice(key, f, prior_draw, log_lik, num)

    def burn_one(key, f):
        return steps(key, f, burn)

    def sample_one(key, f):
        def body(carry, k):
            f, count = carry
            f, n = steps(k, f, thin)
            return (f, count + n), f
        (f, count), fs = lax.scan(body, (f, 0), jax.random.split(key, draws))
        return fs, count

    return (jax.jit(jax.vmap(prior_draw)), jax.jit(jax.vmap(burn_one)),
            jax.jit(jax.vmap(sample_one)))


def ess_rows(X, y, seed, draws, thin, burn):
    import jax

    L = bench.prior_factor(X)
    onehot = np.eye(bench.C)[y]
    start, burn_fn, sample_fn = ess_programs(L, onehot, draws, thin, burn)

    def run(s):
        k_start, k_burn, k_draw = jax.random.split(jax.random.PRNGKey(s), 3)
        keys = [jax.random.split(k, 4) for k in (k_start, k_burn, k_draw)]
        t0 = time.perf_counter()
        f0 = jax.block_until_ready(start(keys[0]))
        f, n_burn = jax.block_until_ready(burn_fn(keys[1], f0))
        t1 = time.perf_counter()
        fs, n_sample = jax.block_until_ready(sample_fn(keys[2], f))
        t2 = time.perf_counter()
        return fs, int(np.sum(n_burn) + np.sum(n_sample)), t1 - t0, t2 - t1

    t = time.perf_counter()
    run(seed + 1000)
    compile_s = time.perf_counter() - t
    fs, evaluations, warmup_s, sampling_s = run(seed)
    steps = 4 * (burn + draws * thin)
    f_draws = np.asarray(fs)                       # (chain, draw, N, C)
    return [_row(f"elliptical slice (thin {thin})", warmup_s, sampling_s, compile_s, f_draws,
                 evaluations, "likelihoods",
                 f"{steps} steps ({evaluations / steps:.2f} likelihoods a step), "
                 f"{burn} burn-in steps a chain")]


# ------------------------------------------------------------------ (c) MAMS
def mams_rows(X, y, seed, draws, thin, num_integration_steps=2.0):
    import blackjax
    import jax
    import jax.numpy as jnp
    from blackjax.mcmc import adjusted_mclmc
    from jax import lax
    from ppgpc.models.logistic_softmax.link import log_link

    L = jnp.asarray(bench.prior_factor(X))
    onehot = jnp.asarray(np.eye(bench.C)[y])
    shape = onehot.shape
    dim = shape[0] * shape[1]
    num_steps = draws * thin

    def logdensity(v):
        f = L @ v.reshape(shape)
        return -0.5 * jnp.sum(v ** 2) + jnp.sum(onehot * log_link(f))

    base = adjusted_mclmc.build_kernel()          # isokinetic McLachlan integrator

    def kernel(rng_key, state, logdensity_fn, step_size, inverse_mass_matrix,
               integration_steps_params):
        """The fixed-length kernel as the tuner calls it: ceil(L / step_size) steps."""
        (avg,) = integration_steps_params
        n = jnp.maximum(jnp.ceil(avg), 1).astype(jnp.int32)
        return base(rng_key, state, logdensity_fn, step_size, integration_steps_params=(n,),
                    inverse_mass_matrix=inverse_mass_matrix)

    def tune_one(key, v0):
        state = adjusted_mclmc.init(v0, logdensity)
        state, params, n_tune = blackjax.adjusted_mclmc_find_L_and_step_size(
            mclmc_kernel=kernel, logdensity_fn=logdensity, num_steps=num_steps, state=state,
            rng_key=key, target=MAMS_TARGET_ACCEPT, frac_tune1=0.1, frac_tune2=0.1,
            frac_tune3=0.0, diagonal_preconditioning=True,
            target_num_integration_steps=num_integration_steps)
        return state, params, n_tune

    @jax.jit
    def tune(keys, v0):
        states, params, n_tune = jax.vmap(tune_one)(keys, v0)
        step = jnp.mean(params.step_size)
        n = jnp.maximum(jnp.ceil(jnp.mean(params.L) / step), 1).astype(jnp.int32)
        return states, step, n, jnp.mean(params.inverse_mass_matrix, axis=0), n_tune

    @jax.jit
    def sample(keys, states, step, n, imm):
        def chain(key, state):
            def transition(state, k):
                state, info = base(k, state, logdensity, step, integration_steps_params=(n,),
                                   inverse_mass_matrix=imm)
                return state, info.acceptance_rate

            def draw(state, k):
                state, accept = lax.scan(transition, state, jax.random.split(k, thin))
                return state, (state.position, jnp.mean(accept))

            _, (vs, accept) = lax.scan(draw, state, jax.random.split(key, draws))
            return vs, jnp.mean(accept)
        vs, accept = jax.vmap(chain)(keys, states)
        return (L @ vs.reshape(vs.shape[:2] + shape)), accept

    def run(s):
        k_start, k_tune, k_draw = jax.random.split(jax.random.PRNGKey(s), 3)
        t0 = time.perf_counter()
        v0 = jax.random.normal(k_start, (4, dim))
        states, step, n, imm, n_tune = jax.block_until_ready(
            tune(jax.random.split(k_tune, 4), v0))
        t1 = time.perf_counter()
        f, accept = jax.block_until_ready(
            sample(jax.random.split(k_draw, 4), states, step, n, imm))
        t2 = time.perf_counter()
        return f, accept, float(step), int(n), int(np.sum(n_tune)), t1 - t0, t2 - t1

    t = time.perf_counter()
    run(seed + 1000)
    compile_s = time.perf_counter() - t
    f, accept, step, n, n_tune, warmup_s, sampling_s = run(seed)
    tune_transitions = int(num_steps * 0.1) * 2 + int(num_steps * 0.1)
    gradients = 2 * (n_tune + 4 * num_steps * n)
    return [_row(f"MAMS (avg {num_integration_steps:g} steps, thin {thin})", warmup_s,
                 sampling_s, compile_s, np.asarray(f), gradients, "gradients",
                 f"step size {step:.3f}, {n} steps a transition, acceptance "
                 f"{float(np.mean(accept)):.2f}; {tune_transitions} tuning transitions a "
                 f"chain ({2 * n_tune} gradients)")]


# ------------------------------------------------------------------ nutpie
def nutpie_rows(X, y, seed):
    rows = []
    for label, _, grads, seconds, ess, rate, rhat, note in bench.nutpie_rows(X, y, seed):
        rows.append({"label": label, "warmup": float("nan"), "sampling": seconds,
                     "compile": float("nan"), "draws": 1000, "ess": ess, "rate": rate,
                     "rate_all": rate, "rhat": rhat, "evaluations": grads,
                     "kind": "gradients", "note": f"seconds: warm-up and draws; {note}"})
    return rows


ROWS = ("nuts", "ess", "mams", "nutpie")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[2])
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=["nuts", "ess", "mams"])
    parser.add_argument("--draws", type=int, default=1000, help="kept draws per chain")
    parser.add_argument("--ess-thin", type=int, default=10,
                        help="elliptical slice steps per kept draw")
    parser.add_argument("--ess-burn", type=int, default=5000,
                        help="elliptical slice steps discarded first")
    parser.add_argument("--mams-thin", type=int, default=2,
                        help="MAMS transitions per kept draw")
    parser.add_argument("--mams-steps", nargs="*", type=float, default=[],
                        help="extra MAMS rows with this target_num_integration_steps")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    X, y = bench.problem()
    print("| sampler | seed | warm-up / tuning s | sampling s | compiling run s | draws "
          "per chain | min bulk ESS of f | ESS/s (sampling) | ESS/s (with warm-up) | "
          "max R-hat | evaluations | ESS per 1k evaluations | note |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    makers = {
        "nuts": lambda s: nuts_rows(X, y, s, args.draws),
        "ess": lambda s: ess_rows(X, y, s, args.draws, args.ess_thin, args.ess_burn),
        "mams": lambda s: [r for k in [2.0, *args.mams_steps]
                           for r in mams_rows(X, y, s, args.draws, args.mams_thin, k)],
        "nutpie": lambda s: nutpie_rows(X, y, s),
    }
    with bench.counting():
        for seed in args.seeds:
            for name in args.rows:
                for r in makers[name](seed):
                    per = 1000 * r["ess"] / r["evaluations"] if r["evaluations"] else np.nan
                    print(f"| {r['label']} | {seed} | {r['warmup']:.1f} | {r['sampling']:.1f} | "
                          f"{r['compile']:.1f} | {r['draws']} | {r['ess']:.0f} | "
                          f"{r['rate']:.0f} | {r['rate_all']:.0f} | {r['rhat']:.4f} | "
                          f"{r['evaluations']} {r['kind']} | {per:.2f} | {r['note']} |",
                          flush=True)


if __name__ == "__main__":
    main()
