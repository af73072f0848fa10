"""Where the time of one SVGPC / Uncollapsed-ILR SVI step goes.

Each part of the minibatch ELBO is timed on its own, forward and forward plus gradient
(``jax.grad`` of a scalar of the part's output), with the model's own functions
(``models/svgp/``), at one layout (docs/math.md section 4):

* ``K_mm Cholesky``: the kernel at the inducing inputs and its Cholesky factor (one per
  latent in the per-latent layout);
* ``K_mb``: the kernel between inducing inputs and a minibatch of B inputs;
* ``a = L_mm^-1 K_mb``: the triangular solve against the B columns;
* ``q marginals``: the mean a^T m and the variance term |R^T a|^2 of q(f) (``marginal_moments``);
* ``SVI step``: one whole step (ELBO, gradient, Adam update), as the driver runs it (a
  ``lax.scan`` over steps).

The parts overlap (each gradient includes its own forward pass) and XLA fuses across them
in the whole step, so the parts need not add up to the step. The last two rows time the
dense kernels the step is made of, for one latent: a matrix product and a triangular solve
of the same sizes, with the rate in GFLOP/s. On the machines here a triangular solve
runs at a sixth of the matrix product's rate (11 against 67 GFLOP/s), which is why the
solve and its gradient dominate.

Per-latent parts map over the latents one at a time, as the model does (``_per_latent``
explains why not ``vmap``: batched LAPACK calls can deadlock jaxlib's CPU thread pool).

    python benchmarks/svgp_step_profile.py                       # per-latent U-ILR, letter's shape
    python benchmarks/svgp_step_profile.py --link softmax --layout shared --batch-size 256

Inputs are Gaussian (only the shapes matter for the time): N = 13500, D = 16, C = 26.
"""

from __future__ import annotations

import argparse
import time


def _timer(repeats: int):
    import jax

    def timed(fn, *args) -> float:
        jax.block_until_ready(fn(*args))  # compile
        start = time.perf_counter()
        for _ in range(repeats):
            jax.block_until_ready(fn(*args))
        return (time.perf_counter() - start) / repeats

    return timed


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--link", choices=["ilr", "softmax"], default="ilr")
    parser.add_argument("--layout", choices=["per-latent", "shared"], default="per-latent")
    parser.add_argument("--num-inducing", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=20, help="SVI steps timed (one scan)")
    parser.add_argument("--repeats", type=int, default=10, help="calls timed per part")
    args = parser.parse_args(argv)

    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from numpyro.infer import SVI, TraceMeanField_ELBO
    from numpyro.optim import optax_to_numpyro

    from ppgpc.gp import linalg  # (the first import of ppgpc's JAX code enables float64)
    from ppgpc.gp.kernels import RBF, gram
    from ppgpc.models import svgp
    from ppgpc.models.svgp import conditional as svgp_conditional
    from ppgpc.gp.sparse import map_outputs

    N, D, C, B, M = 13500, 16, 26, args.batch_size, args.num_inducing
    gen = np.random.default_rng(0)
    X, y = gen.normal(size=(N, D)), gen.integers(0, C, N)
    per_latent = args.layout == "per-latent"
    data = svgp.prepare(X, y, C, link=args.link, num_inducing=M, shared_kernel=not per_latent,
                        shared_inducing=not per_latent, kernel_prior=True)
    kernel = RBF(ard=True)
    L = data.num_latent
    timed = _timer(args.repeats)

    params = kernel.initial_params(D)
    if per_latent:
        params = {k: jnp.broadcast_to(v, (L,) + v.shape) for k, v in params.items()}
    Z, Xb = data.inducing_init, data.X[:B]
    q_mean = jnp.asarray(gen.normal(size=(L, M)))
    q_tril = jnp.asarray(np.tril(gen.normal(size=(L, M, M))) * 0.05) + jnp.eye(M)

    def chol(p, Z):
        return svgp_conditional._chol_mm(data, kernel, p, Z)

    def kmb(p, Z):
        return svgp_conditional._per_latent(data, lambda p, z: gram(kernel, p, z, Xb))(p, Z)

    chol_mm, K = chol(params, Z), kmb(params, Z)

    # one latent at a time, as the model maps (``_per_latent``)
    solve = map_outputs(linalg.tri_solve, (0, 0)) if per_latent else linalg.tri_solve

    a = solve(chol_mm, K)
    resid = jnp.ones(a.shape[:-2] + a.shape[-1:])

    def moments(a, m, r):
        mean, var = svgp.marginal_moments(a, resid, m, r)
        return jnp.sum(mean) + jnp.sum(var)

    print(f"{args.link} link, {args.layout} layout: L = {L} latents, M = {M}, B = {B}, "
          f"D = {D}; {jax.devices()[0].platform}, float64")
    print(f"{'part':34s} {'forward ms':>11s} {'fwd+grad ms':>12s}")
    print("-" * 59, flush=True)

    def show(name, forward, grad):
        fwd = "" if np.isnan(forward) else f"{forward * 1e3:11.1f}"
        print(f"{name:34s} {fwd:>11s} {grad * 1e3:12.1f}", flush=True)

    parts = [("K_mm Cholesky", chol, (params, Z)), ("K_mb", kmb, (params, Z)),
             ("a = L_mm^-1 K_mb", solve, (chol_mm, K)),
             ("q marginals", moments, (a, q_mean, q_tril))]
    for name, fn, fn_args in parts:
        scalar = lambda *x, fn=fn: jnp.sum(fn(*x) ** 2)  # noqa: E731
        forward = timed(jax.jit(scalar), *fn_args)
        grad = timed(jax.jit(jax.grad(scalar, argnums=tuple(range(len(fn_args))))), *fn_args)
        show(name, forward, grad)

    svi = SVI(svgp.model, svgp.guide, optax_to_numpyro(optax.adam(0.01)),
              TraceMeanField_ELBO())
    state = jax.jit(lambda k: svi.init(k, data, kernel, B))(jax.random.PRNGKey(0))

    @jax.jit
    def run(s):
        return jax.lax.scan(lambda s, _: svi.update(s, data, kernel, B), s, None,
                            length=args.steps)

    step = timed(run, state) / args.steps
    show("SVI step (ELBO, gradient, Adam)", float("nan"), step)

    lhs, rhs = (chol_mm[0], K[0]) if per_latent else (chol_mm, K)
    matmul = timed(jax.jit(lambda A, Bm: A @ Bm), lhs, rhs)
    trsm = timed(jax.jit(lambda A, Bm: linalg.tri_solve(A, Bm)), lhs, rhs)
    flops = M * M * B
    print(f"{'matrix product (M x M) (M x B)':34s} {matmul * 1e3:11.2f} "
          f"{'':12s} {2 * flops / matmul / 1e9:5.1f} GFLOP/s")
    print(f"{'triangular solve (same sizes)':34s} {trsm * 1e3:11.2f} "
          f"{'':12s} {flops / trsm / 1e9:5.1f} GFLOP/s")


if __name__ == "__main__":
    main()
