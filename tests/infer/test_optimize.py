"""Type-II ML / MAP point estimates (``ppgpc.infer.optimize``): L-BFGS and Adam on the device."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from compile_count import count_compilations
from conftest import toy_problem
from ppgpc.infer import fit
from ppgpc.infer.optimize import STOP_REASONS, minimize
from ppgpc.infer.sites import minimize_sites, optimize_sites, _site_objective

X_SCALE = np.random.default_rng(4).normal(scale=2.5, size=200)


def scale_model(x):
    """x_i ~ N(0, s^2): the type-II ML optimum is s = sqrt(mean(x^2)), in closed form."""
    s = numpyro.sample("s", dist.LogNormal(0.0, 1.0))
    numpyro.sample("x", dist.Normal(0.0, s).expand([x.shape[0]]), obs=x)


@pytest.mark.parametrize("optimizer, options", [
    ("lbfgs", {}),
    ("adam", {"learning_rate": 0.05, "max_iter": 3000}),
])
def test_both_optimisers_reach_the_closed_form_maximum(optimizer, options):
    """The maximum likelihood scale is sqrt(mean x^2); both optimisers stop within 1e-5 of
    it (an optimisation tolerance: the objective is deterministic)."""
    x = jnp.asarray(X_SCALE)
    opt = optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer=optimizer,
                         tol=1e-8, **options)
    want = float(np.sqrt(np.mean(X_SCALE ** 2)))
    assert float(opt.params["s"]) == pytest.approx(want, rel=1e-5)
    assert opt.num_iterations > 0


def test_adam_stops_at_the_gradient_tolerance_and_reports_convergence():
    x = jnp.asarray(X_SCALE)
    opt = optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer="adam",
                         learning_rate=0.05, max_iter=20_000, tol=1e-3)
    assert opt.converged and opt.grad_norm <= 1e-3
    assert opt.num_iterations < 20_000
    short = optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer="adam",
                           learning_rate=0.05, max_iter=5, tol=1e-3)
    assert short.num_iterations == 5 and not short.converged


def capped_scale_model(x):
    """``scale_model`` with zero density for s >= 2: its optimum, sqrt(mean x^2) = 2.5,
    lies past the cap, so a long step lands where the log density is -inf."""
    s = numpyro.sample("s", dist.LogNormal(0.0, 1.0))
    numpyro.factor("cap", jnp.where(s < 2.0, 0.0, -jnp.inf))
    numpyro.sample("x", dist.Normal(0.0, s).expand([x.shape[0]]), obs=x)


def test_adam_stops_with_a_clear_error_at_a_non_finite_objective():
    x = jnp.asarray(X_SCALE)
    with pytest.raises(ValueError, match=r"became non-finite after [1-9]\d* Adam steps"):
        optimize_sites(capped_scale_model, {"s": 1.0}, args=(x,), optimizer="adam",
                       learning_rate=0.5, max_iter=200)


def test_bad_optimizer_options_name_the_problem():
    x = jnp.asarray(X_SCALE)
    with pytest.raises(ValueError, match="unknown optimizer 'bfgs'"):
        optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer="bfgs")
    with pytest.raises(ValueError, match="learning_rate must be finite and positive, got 0.0"):
        optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer="adam", learning_rate=0.0)
    for optimizer in ("adam", "lbfgs"):   # Adam took no step for max_iter < 1
        with pytest.raises(ValueError, match="max_iter must be an integer >= 1, got -3"):
            optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer=optimizer, max_iter=-3)


def test_adam_type_ii_ml_of_ilr_gp_reaches_the_lbfgs_optimum():
    """On a small ILR-GP problem, 2000 Adam steps reach L-BFGS's log marginal likelihood to
    within 1e-3 nats, and the driver records which optimiser ran."""
    X, y = toy_problem(40, 3)
    lbfgs = fit("ilr_gp", X, y, method="exact", num_draws=10)
    adam = fit("ilr_gp", X, y, method="exact", num_draws=10, optimizer="adam",
               learning_rate=0.05, max_iter=2000)
    assert lbfgs.info.optimizer.optimizer == "lbfgs" and adam.info.optimizer.optimizer == "adam"
    assert adam.info.optimizer.value == pytest.approx(
        lbfgs.info.optimizer.value, abs=1e-3)
    with pytest.raises(TypeError, match="unknown option"):
        fit("ilr_gp", X, y, method="exact", adam_steps=10)


def test_lbfgs_reports_why_it_stopped():
    """Each stopping test of the module docstring, on the closed-form scale model."""
    x = jnp.asarray(X_SCALE)
    want = float(np.sqrt(np.mean(X_SCALE ** 2)))
    at_tol = optimize_sites(scale_model, {"s": 1.0}, args=(x,), tol=1e-3)
    assert at_tol.stop_reason == "gradient tolerance" and at_tol.converged
    assert at_tol.grad_norm <= 1e-3
    # tol = 0 leaves the relative decrease (SciPy's factr test) to stop it, at the optimum
    flat = optimize_sites(scale_model, {"s": 1.0}, args=(x,), tol=0.0)
    assert flat.stop_reason == "relative objective change" and flat.converged
    assert float(flat.params["s"]) == pytest.approx(want, rel=1e-6)
    capped = optimize_sites(scale_model, {"s": 1.0}, args=(x,), max_iter=1)
    assert capped.stop_reason == "max_iter" and not capped.converged
    assert capped.num_iterations == 1 and capped.num_evaluations >= 2


def test_lbfgs_steps_back_from_a_non_finite_objective():
    """The capped model's density is zero past s = 2 (its unconstrained optimum lies beyond):
    -inf is read as +inf with a zero gradient, so the line search steps back and L-BFGS ends
    just below the cap with a finite objective, not converged (the gradient there is not
    small: the maximum is on the edge of the support)."""
    x = jnp.asarray(X_SCALE)
    opt = optimize_sites(capped_scale_model, {"s": 1.0}, args=(x,))
    assert 1.99 < float(opt.params["s"]) < 2.0
    assert np.isfinite(opt.objective) and not opt.converged
    assert opt.stop_reason == "line search failure"


def rosenbrock(u):
    return 100.0 * (u[1] - u[0] ** 2) ** 2 + (1.0 - u[0]) ** 2


def test_lbfgs_steps_meet_the_strong_wolfe_conditions_on_rosenbrock():
    """Rosenbrock's valley from (-1.2, 1), where the line search must both extend and
    narrow its bracket: every iterate u_k (the run capped at k iterations; max_iter is
    traced, so one program) meets both Wolfe conditions against u_{k-1} along s = u_k -
    u_{k-1} (the step's length cancels), and the run reaches the minimiser (1, 1) in about
    as many iterations and evaluations as SciPy's L-BFGS-B."""
    from scipy import optimize as scipy_optimize

    start = jnp.array([-1.2, 1.0])
    run = jax.jit(lambda k: minimize(rosenbrock, start, max_iter=k, tol=1e-8, ftol=0.0))
    final = run(1000)
    assert STOP_REASONS[int(final.stop_reason)] == "gradient tolerance"
    np.testing.assert_allclose(final.x, [1.0, 1.0], atol=1e-7)
    grad = jax.grad(rosenbrock)
    before = start
    for k in range(1, int(final.num_iterations) + 1):
        now = run(k).x
        s = now - before
        slope_before, slope_now = float(grad(before) @ s), float(grad(now) @ s)
        assert slope_before < 0, k
        assert float(rosenbrock(now)) <= float(rosenbrock(before)) + 1e-4 * slope_before, k
        assert abs(slope_now) <= 0.9 * abs(slope_before) + 1e-12, k
        before = now
    ref = scipy_optimize.minimize(lambda u: (float(rosenbrock(u)), np.asarray(grad(u))),
                                  np.asarray(start), jac=True, method="L-BFGS-B",
                                  options={"gtol": 1e-8, "ftol": 0.0, "maxiter": 1000})
    assert int(final.num_iterations) <= 1.5 * ref.nit
    assert int(final.num_evaluations) <= 1.5 * ref.nfev


def test_the_lbfgs_program_holds_one_copy_of_the_objective():
    """The line search is a state machine in the loop's one body, so the objective and its
    gradient are traced, and compiled, once per program (three times with a separate first
    evaluation and the bracketing and zoom steps in two branches)."""
    traces = []

    def counted(u):
        traces.append(1)
        return rosenbrock(u)

    jax.jit(lambda u0: minimize(counted, u0)).lower(jnp.array([-1.2, 1.0]))
    assert len(traces) == 1


def test_minimize_vmaps_over_starting_points():
    """A convex quartic from four starts: each run reaches the same minimiser."""
    def fun(u):
        return jnp.sum((u - jnp.array([1.0, -2.0])) ** 2) + 0.1 * jnp.sum(u ** 4)

    starts = jnp.array([[0.0, 0.0], [3.0, 3.0], [-4.0, 1.0], [10.0, -10.0]])
    best = jax.jit(jax.vmap(lambda u0: minimize(fun, u0, tol=1e-9)))(starts)
    alone = minimize(fun, starts[0], tol=1e-9)
    assert best.x.shape == (4, 2) and bool(jnp.all(best.converged))
    np.testing.assert_allclose(best.x, np.broadcast_to(alone.x, (4, 2)), atol=1e-7)


@pytest.mark.parametrize("optimizer, options", [
    ("lbfgs", {}),
    ("adam", {"learning_rate": 0.05, "max_iter": 3000}),
])
def test_a_whole_type_ii_fit_vmaps_over_data_sets(optimizer, options):
    """``minimize_sites`` vmapped over three data sets of the scale model (the data traced
    inside the objective) gives each its own closed-form optimum sqrt(mean x^2)."""
    xs = jnp.asarray(X_SCALE) * jnp.array([0.5, 1.0, 3.0])[:, None]

    def fit_one(x):
        return minimize_sites(scale_model, {"s": jnp.asarray(1.0)}, (x,), tol=1e-8,
                              optimizer=optimizer, **options)

    params, best = jax.jit(jax.vmap(fit_one))(xs)
    want = np.sqrt(np.mean(np.asarray(xs) ** 2, axis=1))
    np.testing.assert_allclose(params["s"], want, rtol=1e-5)
    assert best.value.shape == (3,)
    assert all(STOP_REASONS[int(c)] != "non-finite objective" for c in best.stop_reason)


def test_a_refit_on_new_data_of_the_same_shape_compiles_nothing():
    """The optimiser is one jitted call with the data traced: a second ILR-GP type-II fit
    on other inputs and targets of the same shape triggers no XLA compilation."""
    from ppgpc.gp.kernels import RBF
    from ppgpc.models import ilr_gp

    kernel = RBF(ard=True)
    first, second = (ilr_gp.prepare(*toy_problem(30, 3, seed=seed), 3) for seed in (0, 1))
    inits = [ilr_gp.initial_hypers(d, kernel) for d in (first, second)]
    with count_compilations() as compiled_first:
        a = optimize_sites(ilr_gp.collapsed_model, inits[0], args=(first, kernel))
    with count_compilations() as compiled_second:
        b = optimize_sites(ilr_gp.collapsed_model, inits[1], args=(second, kernel))
    assert compiled_first  # the counter sees compilations
    assert compiled_second == []
    assert a.converged and b.converged and a.objective != b.objective


@pytest.mark.parametrize("optimizer, options", [
    ("lbfgs", {}),
    ("adam", {"learning_rate": 0.05, "max_iter": 130}),
])
def test_a_fit_in_windows_with_progress_takes_the_steps_of_one_device_call(
        optimizer, options, capsys, monkeypatch):
    """With ``progress_bar=True`` the optimiser runs in windows (here forced to one
    iteration each) and a counter shows the iterations; the windows resume the same state
    in the same program, so the optimum, the counts and the stop are those of one call, bit
    for bit (an ILR-GP type-II fit with an ARD kernel, 20-odd L-BFGS iterations)."""
    from ppgpc.gp.kernels import RBF
    from ppgpc.models import ilr_gp
    from ppgpc.runtime import loop, progress

    monkeypatch.setattr(loop, "WINDOW_SECONDS", 0.0)
    monkeypatch.setattr(progress, "COUNTER_DELAY", 0.0)
    kernel = RBF(ard=True)
    data = ilr_gp.prepare(*toy_problem(40, 3, seed=2), 3)
    init = ilr_gp.initial_hypers(data, kernel)
    run = functools.partial(optimize_sites, ilr_gp.collapsed_model, init, args=(data, kernel),
                            optimizer=optimizer, **options)
    shown = run(progress_bar=True)
    err = capsys.readouterr().err
    plain = run()
    assert capsys.readouterr().err == ""
    assert shown.num_iterations == plain.num_iterations > 5
    assert shown.num_evaluations == plain.num_evaluations
    assert shown.stop_reason == plain.stop_reason
    assert shown.objective == plain.objective
    for name in plain.params:
        np.testing.assert_array_equal(shown.params[name], plain.params[name])
    assert "(type-II ML): " in err and "it [" in err and f"{plain.num_iterations} iterations" in err


def test_windows_of_the_lbfgs_loop_resume_where_they_stopped():
    """``lbfgs_run`` with a window end every iteration, resumed each time, reaches the
    state of one run: the loop halts only between iterations, never inside a line search."""
    from ppgpc.infer.optimize import RUNNING, finite_or_inf, lbfgs_init, lbfgs_run

    def rosenbrock(x):
        return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    value_and_grad = finite_or_inf(rosenbrock)
    run = jax.jit(functools.partial(lbfgs_run, value_and_grad, tol=1e-9, ftol=0.0))
    x0 = jnp.array([-1.2, 1.0, -0.5, 0.8])
    whole = run(lbfgs_init(x0), 200, 200)
    state, limit = lbfgs_init(x0), 0
    while int(state.stop) == RUNNING:
        limit += 1
        state = run(state, limit, 200)
        assert int(state.num_iterations) == limit or int(state.stop) != RUNNING
    assert int(whole.num_iterations) > 20
    for got, want in zip(state, whole):
        np.testing.assert_array_equal(got, want)


def test_map_on_wine_reaches_scipy_lbfgsb_optimum():
    """ILR-GP with an ARD RBF kernel on wine (178 x 13, z-scored), MAP: our L-BFGS's optimum
    is at least as high as SciPy's L-BFGS-B's (same objective, start, gtol and ftol) up to
    1e-6 relative. Both stop once an iteration gains less than ftol = 2.2e-9 relative; near
    the optimum L-BFGS's gains shrink superlinearly, so each stops within a few such gains
    of the maximum, and the two line searches' different iterates cannot separate them by
    more than a small multiple of that: 1e-6 leaves two orders of magnitude to spare."""
    scipy_optimize = pytest.importorskip("scipy.optimize")
    from ppgpc.datasets import load
    from ppgpc.gp.kernels import make_kernel
    from ppgpc.models import get_spec

    X, y = load("wine")
    X = (X - X.mean(0)) / X.std(0)
    spec, kernel = get_spec("ilr_gp"), make_kernel("rbf-ard")
    data = spec.prepare(X, y - y.min(), 3)
    init = spec.initial_hypers(data, kernel)
    ours = optimize_sites(spec.conjugate.collapsed_model, init, args=(data, kernel), include_prior=True)
    fun, x0, _ = _site_objective(spec.conjugate.collapsed_model, init, (data, kernel), True)
    value_and_grad = jax.jit(jax.value_and_grad(fun))

    def host(u):
        value, grad = value_and_grad(jnp.asarray(u))
        return float(value), np.asarray(grad)

    ref = scipy_optimize.minimize(host, np.asarray(x0), jac=True, method="L-BFGS-B",
                                  options={"maxiter": 500, "gtol": 1e-6})
    assert ref.success and ours.converged
    assert ours.objective >= -ref.fun - 1e-6 * abs(ref.fun)
