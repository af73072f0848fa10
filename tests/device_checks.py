"""Checks that need several JAX devices, run as a script in a subprocess (``test_devices.py``).

JAX fixes its device count when it starts, so the tests run this file with
``XLA_FLAGS=--xla_force_host_platform_device_count=4``. Each check prints one JSON line
``{"check": name, ...}`` with the largest relative differences it found; the test asserts
on them. ``python tests/device_checks.py single`` runs the sums-over-devices checks of the
collapsed models, ``... minibatch`` those of the minibatch ELBOs and minibatch fits,
``python tests/device_checks.py distributed <process_id> <num_processes> <port>`` one
process of the two-process ``jax.distributed`` fit, which prints its predictions.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def relative(got, want) -> float:
    """max |got - want| / max |want| over every leaf of two pytrees."""
    import jax

    worst = 0.0
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        worst = max(worst, float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-300)))
    return worst


def toy(n=203, seed=0):
    """(X (n, 3), y (n,)) three classes, not separable."""
    gen = np.random.default_rng(seed)
    X = gen.normal(size=(n, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * gen.normal(size=n) > 0).astype(int) + (X[:, 2] > 0.8)
    return X, y


def bound_checks() -> None:
    """Each collapsed model's bound and gradient on a 4-device mesh against one device."""
    import jax
    import jax.numpy as jnp

    from ppgpc.runtime import blocks
    from ppgpc.gp import sparse
    from ppgpc.runtime.blocks import Placement
    from ppgpc.infer.sites import log_density_terms
    from ppgpc.gp.kernels import make_kernel
    from ppgpc.models import dirichlet_gp, ilr_gp

    X, y = toy()
    kernel = make_kernel("rbf-ard")
    mesh = blocks.resolve_mesh(4)
    cases = {
        "ilr shared": (ilr_gp, {"learn_noise_scale": True}, {}),
        "ilr per coordinate": (ilr_gp, {"learn_noise_scale": True},
                               {"shared_inducing": False}),
        "gpd two-level": (dirichlet_gp, {"learn_noise_scale": True}, {}),
        "gpd class kernels": (dirichlet_gp, {"shared_kernel": False}, {}),
        "gpd per class": (dirichlet_gp, {}, {"shared_inducing": False}),
    }
    for name, (module, options, sparse_options) in cases.items():
        data = module.sparse_prepare(X, y, 3, num_inducing=8, seed=1, **options,
                                     **sparse_options)
        # a block size that does not divide N, so the last block on each device is padded
        data = data._replace(placement=Placement(block_rows=13))
        hypers = module.sparse_initial_hypers(data, kernel)
        gen = np.random.default_rng(2)
        hypers = {k: v * (1 + 0.1 * gen.uniform(size=np.shape(v))) for k, v in hypers.items()}

        def objective(h, data):
            return log_density_terms(module.sparse_collapsed_model, (data, kernel), h, True)

        value_and_grad = jax.jit(jax.value_and_grad(objective))
        single = value_and_grad(hypers, data)
        sharded = value_and_grad(hypers, sparse.on_devices(data, mesh))
        posterior = jax.jit(module.sparse_condition, static_argnums=1)
        post_single = posterior(data, kernel, hypers)
        post_sharded = posterior(sparse.on_devices(data, mesh), kernel, hypers)
        print(json.dumps({"check": "bound", "case": name,
                          "value": relative(sharded[0], single[0]),
                          "gradient": relative(sharded[1], single[1]),
                          "posterior": relative(post_sharded, post_single),
                          "devices": len(jnp.asarray(sharded[0]).devices())}), flush=True)


def fit_checks() -> None:
    """Driver and estimator fits on 4 devices against one device: predictions."""
    from ppgpc import DirichletGPClassifier, ILRGPClassifier
    from ppgpc.infer import fit

    X, y = toy()
    Xs = toy(40, seed=7)[0]
    for model in ("ilr_gp_sparse", "dirichlet_gp_sparse"):
        runs = [fit(model, X, y, method="exact", model_options={"num_inducing": 8},
                    max_iter=15, num_draws=4, devices=devices) for devices in (None, 4)]
        print(json.dumps({"check": "fit", "case": model,
                          "proba": relative(runs[1].predict_proba(Xs),
                                            runs[0].predict_proba(Xs)),
                          "devices": runs[1].info.devices}), flush=True)
    for cls, options in ((ILRGPClassifier, {"epsilon": 0.99}),
                         (DirichletGPClassifier, {"alpha_eps": 0.01})):
        runs = [cls(**options, inference="collapsed", num_inducing=8, progress=False,
                    inference_options={"max_iter": 15, **extra}).fit(X, y)
                for extra in ({}, {"devices": 4})]
        print(json.dumps({"check": "estimator", "case": cls.__name__,
                          "proba": relative(runs[1].predict_proba(Xs),
                                            runs[0].predict_proba(Xs)),
                          "devices": runs[1].result_.info.devices}), flush=True)


def svgp_checks() -> None:
    """SVGPC and Uncollapsed-ILR: the minibatch ELBO and its gradient with the batch split
    over 4 devices against one device (same parameters, same batch and draws), then short
    fits' predictions."""
    import jax
    import optax
    from numpyro.infer import SVI, TraceMeanField_ELBO
    from numpyro.optim import optax_to_numpyro

    from ppgpc import SoftmaxSVGPClassifier
    from ppgpc.runtime.blocks import resolve_mesh
    from ppgpc.infer import fit
    from ppgpc.gp.kernels import make_kernel
    from ppgpc.models import svgp as softmax_svgp

    X, y = toy()
    kernel = make_kernel("rbf-ard")
    mesh = resolve_mesh(4)
    cases = {"svgpc": dict(link="softmax"),
             "uncollapsed-ilr price per latent": dict(link="ilr", ell_estimator="price",
                                                      shared_kernel=False,
                                                      shared_inducing=False)}
    for name, options in cases.items():
        data = softmax_svgp.prepare(X, y, 3, num_inducing=8, seed=1, **options)
        svi = SVI(softmax_svgp.model, softmax_svgp.guide, optax_to_numpyro(optax.adam(0.01)),
                  TraceMeanField_ELBO())
        init = jax.jit(svi.init, static_argnums=(2, 3))  # (op by op it takes seconds)
        params = svi.get_params(init(jax.random.PRNGKey(0), data, kernel, BATCH))
        gen = np.random.default_rng(2)
        params = {k: v * (1 + 0.1 * gen.uniform(size=np.shape(v))) for k, v in params.items()}

        def loss(p, data):
            return svi.loss.loss(jax.random.PRNGKey(3), p, softmax_svgp.model,
                                 softmax_svgp.guide, data, kernel, BATCH)

        value_and_grad = jax.jit(jax.value_and_grad(loss))
        single = value_and_grad(params, data)
        sharded = value_and_grad(params, softmax_svgp.on_devices(data, mesh))
        print(json.dumps({"check": "minibatch elbo", "case": name,
                          "value": relative(sharded[0], single[0]),
                          "gradient": relative(sharded[1], single[1]),
                          "devices": len(sharded[0].devices())}), flush=True)
    Xs = toy(40, seed=7)[0]
    short = dict(method="svi", batch_size=BATCH, max_iter=30, window=10, num_draws=50,
                 progress_bar=False, model_options={"num_inducing": 8})
    runs = [fit("ilr_gp_uncollapsed", X, y, devices=devices, **short)
            for devices in (None, 4)]
    print(json.dumps({"check": "fit", "case": "ilr_gp_uncollapsed",
                      "proba": relative(runs[1].predict_proba(Xs), runs[0].predict_proba(Xs)),
                      "devices": runs[1].info.devices}), flush=True)
    runs = [SoftmaxSVGPClassifier(num_inducing=8, progress=False, inference_options={
        "batch_size": BATCH, "max_iter": 30, "window": 10, "num_draws": 50, **extra}).fit(X, y)
        for extra in ({}, {"devices": 4})]
    print(json.dumps({"check": "estimator", "case": "SoftmaxSVGPClassifier",
                      "proba": relative(runs[1].predict_proba(Xs), runs[0].predict_proba(Xs)),
                      "devices": runs[1].result_.info.devices}), flush=True)


BATCH = 50
"""Minibatch size of the minibatch checks: 4 devices do not divide it, so the last
device's share is padded."""


def stochastic_cavi_checks() -> None:
    """The stochastic CAVI of the logistic-softmax GP: one step (natural-gradient step on
    q(v), local parameters, Adam steps on the hyperparameters and Z) and the full-data ELBO
    with the points split over 4 devices against one device, then short fits' predictions."""
    import jax
    import jax.numpy as jnp

    from ppgpc.runtime.blocks import Placement, resolve_mesh
    from ppgpc.infer import fit
    from ppgpc.gp.kernels import make_kernel
    from ppgpc.models import logistic_softmax
    from ppgpc.models.logistic_softmax import cavi as lsc
    from ppgpc.models.logistic_softmax import stochastic_cavi as lss

    X, y = toy()
    kernel = make_kernel("rbf-ard")
    data = logistic_softmax.prepare(X, y, 3)
    placed = logistic_softmax.on_devices(data, resolve_mesh(4))
    hypers = logistic_softmax.initial_hypers(data, kernel)
    Z = data.X[:8]
    start = lsc.cavi_init(hypers, Z, X.shape[0], 3)
    state = lss.stochastic_cavi_init(X.shape[0], 3, 8)
    outs = []
    for d in (data, placed):
        # the fit's first window (same static settings, so the fit below reuses the
        # compiled program): 10 steps, each a natural-gradient step on q(v), the local
        # parameters of its batch and one Adam step on the hyperparameters and Z
        window = lss._stochastic_window(
            jax.random.PRNGKey(4), jnp.asarray(0), d.onehot, d.X, kernel, start.log_hypers,
            Z, state, start.opt_state, 0.05, 1.0, 0.6, num_iters=10, batch_size=BATCH,
            class_batch_size=3, learn_hypers=True, learn_inducing=True, include_prior=True,
            num_steps=1, placement=d.placement)
        full = lss.full_data_elbo(d.onehot, d.X, kernel, window[0], window[1], window[2],
                                 d.placement)
        outs.append((window, full))
    (step_1, full_1), (step_4, full_4) = outs
    print(json.dumps({"check": "cavi steps", "case": "logistic_softmax",
                      "state": relative(step_4[2], step_1[2]),
                      "hypers": relative(step_4[:2], step_1[:2]),
                      "elbo": relative(full_4[0], full_1[0]),
                      "elbo_state": relative(full_4[1], full_1[1]),
                      "devices": len(jnp.asarray(full_4[0]).devices())}), flush=True)
    Xs = toy(40, seed=7)[0]
    runs = [fit("logistic_softmax", X, y, method="cavi", num_inducing=8, batch_size=BATCH,
                max_iter=30, elbo_every=10, num_draws=50, devices=devices)
            for devices in (None, 4)]
    print(json.dumps({"check": "fit", "case": "logistic_softmax stochastic cavi",
                      "proba": relative(runs[1].predict_proba(Xs), runs[0].predict_proba(Xs)),
                      "devices": runs[1].info.devices}), flush=True)


def distributed(process_id: int, num_processes: int, port: int) -> None:
    """One process of a ``jax.distributed`` Collapsed-ILR fit over every process's CPU
    device (gloo collectives); prints its predictions, which every process holds whole."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"localhost:{port}",
                               num_processes=num_processes, process_id=process_id)
    from ppgpc.infer import fit

    X, y = toy()
    result = fit("ilr_gp_sparse", X, y, devices=len(jax.devices()), **DISTRIBUTED_FIT)
    print(json.dumps({"check": "distributed", "process": process_id,
                      "global_devices": len(jax.devices()),
                      "devices": result.info.devices,
                      "proba": np.asarray(result.predict_proba(toy(40, seed=7)[0])).tolist()}),
          flush=True)
    jax.distributed.shutdown()


DISTRIBUTED_FIT = dict(method="exact", model_options={"num_inducing": 8}, max_iter=15,
                       num_draws=4)
"""The fit of the two-process check (the test repeats it in a single process)."""


if __name__ == "__main__":
    import ppgpc.runtime  # noqa: F401  (float64, as every ppgpc user gets it)

    if sys.argv[1] == "single":
        bound_checks()
        fit_checks()
    elif sys.argv[1] == "minibatch":
        svgp_checks()
        stochastic_cavi_checks()
    elif sys.argv[1] == "distributed":
        distributed(*(int(a) for a in sys.argv[2:5]))
    else:
        raise SystemExit(f"unknown check {sys.argv[1]!r}")
