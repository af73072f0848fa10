"""Pure prediction functions of a fitted posterior (``FitResult``), one draw function per
predictive kind.

A fit's ``predictive_kind`` says how a posterior draw turns into latent values at new
inputs (``ppgpc.infer.results``' module docstring gives the three kinds); ``DRAWS_BY_KIND``
maps each kind to its function, all with one signature::

    draws(result, key, Xs, num_draws=None, shared=False) -> (chain, draw, n, L)

for one padded block Xs (n, D). Everything else here (``predict_latent``,
``predict_proba_draws``, ``predict_proba``, ``training_latent``, ``log_likelihood``) is
written once over that signature: blocks of at most ``PREDICT_BLOCK`` rows padded to one of
two sizes (shape-stable, so a new number of rows compiles nothing), keys from
``stream_key(seed, tag)``, probabilities p(y* = c | data) ~= (1/S) sum_s p(y* = c | f*_s).

The functions read a result's fields only (``spec``, ``kernel``, ``data``, ``hypers``,
``latent``, ``inducing``, ``point_hypers``, ``seed``, ``num_chains``, ``num_draws``,
``num_classes``) and ``hyper_draw``; ``FitResult``'s prediction methods call them.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppgpc.infer.common import DEVICES_OPTION
from ppgpc.runtime.padding import bucket, pad_rows
from ppgpc.runtime.programs import jit
from ppgpc.validation import check_features

__all__ = ["DRAWS_BY_KIND", "PREDICT_BLOCK", "MIN_BUCKET", "MIN_PREDICTIVE_DRAWS",
           "EXPORT_TAG", "stream_key", "conjugate_draws", "latent_draws", "inducing_draws",
           "block_draws", "predict_latent", "predict_proba_draws", "predict_proba",
           "training_latent", "log_likelihood"]

PREDICT_BLOCK = 512
"""Inputs per block of a prediction: larger inputs go through blocks of this many rows."""

MIN_BUCKET = 64
"""The small padded block. A block of n <= ``MIN_BUCKET`` rows is padded to ``MIN_BUCKET``
rows, a larger one to ``PREDICT_BLOCK``, so the jitted draw functions are compiled for at
most two input sizes per fitted model, never once per number of rows. Padding a few rows to
64 costs a (64 x N) cross-covariance, negligible beside the compilation it saves."""

MIN_PREDICTIVE_DRAWS = 1000
"""``predict_proba`` of a point-hyperparameter conjugate fit averages over at least this
many predictive draws, however few training-latent draws the fit stored."""

# Tags folded into ``PRNGKey(seed)``: one stream per use, each fixed by the fit's seed.
PROBA_TAG = 1  # the standard normals shared by every row of predict_proba(_draws)
LATENT_TAG = 2  # per-row draws of predict_latent (then folded with the block index)
TRAINING_TAG = 3  # per-row draws of the training latent of an "inducing" fit (likewise)
EXPORT_TAG = 4
"""The tag of the ArviZ export's draws (``ppgpc.infer.arviz_export``): with the others above,
folded into ``PRNGKey(seed)`` so that each use of a fit's seed draws its own stream."""


def stream_key(seed: int, tag: int) -> jax.Array:
    """The key of one use of a fit's randomness: ``fold_in(PRNGKey(seed), tag)``, one stream
    per tag (``EXPORT_TAG`` for the ArviZ export; predictions use tags 1 to 3)."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), tag)


# ------------------------------------------------------------------ blocks of rows
def _bucket(n: int) -> int:
    """The padded size of a block of 1 <= n <= ``PREDICT_BLOCK`` rows."""
    return MIN_BUCKET if n <= MIN_BUCKET else PREDICT_BLOCK


def _blocks(X: np.ndarray):
    """(start, stop, padded block) over the rows of X (n, D): blocks of ``PREDICT_BLOCK``
    rows, each padded to its bucket with copies of its first row (dropped after)."""
    for start in range(0, X.shape[0], PREDICT_BLOCK):
        block = X[start:start + PREDICT_BLOCK]
        pad = _bucket(block.shape[0]) - block.shape[0]
        yield start, start + block.shape[0], np.concatenate(
            [block, np.broadcast_to(block[:1], (pad,) + block.shape[1:])])


def _map_blocks(Xs: np.ndarray, block_fn: Callable, empty_shape: tuple) -> np.ndarray:
    """``block_fn(i, padded block)`` over the padded blocks of Xs, the padding rows dropped
    and the blocks joined on axis -2 (rows), on the host so that no new number of rows
    compiles anything (callers return it with ``jax.device_put``, which compiles nothing,
    where ``jnp.asarray`` compiles a copy per shape)."""
    out = [np.asarray(block_fn(i, block))[..., :stop - start, :]
           for i, (start, stop, block) in enumerate(_blocks(Xs))]
    return np.concatenate(out, axis=-2) if out else np.zeros(empty_shape)


def _standard_normals(key, shape, shared: bool):
    """(..., n, L) standard normals; with ``shared``, one (..., 1, L) draw broadcast over
    the n rows, so that a row's draws do not depend on the other rows."""
    if not shared:
        return jax.random.normal(key, shape)
    return jnp.broadcast_to(jax.random.normal(key, shape[:-2] + (1, shape[-1])), shape)


def _flat(x: jax.Array) -> jax.Array:
    """(chain, draw, ...) -> (chain * draw, ...)."""
    return x.reshape((-1,) + x.shape[2:])


def flat_hypers(result) -> dict:
    """Hyperparameter draws by site name, broadcast to (chain, draw, ...) and flattened to
    (chain * draw, ...)."""
    lead = (result.num_chains, result.num_draws)
    return {k: _flat(jnp.broadcast_to(v, lead + v.shape[2:])) for k, v in result.hypers.items()}


def _unflatten(result, draws: jax.Array) -> jax.Array:
    """(chain * draw, n, L) -> (chain, draw, n, L)."""
    return draws.reshape((result.num_chains, result.num_draws) + draws.shape[1:])


def padded_training(result, latent=None):
    """(data, latent): the result's training data, and draws (..., N, L) of the latent
    there, padded with zero rows to ``ppgpc.runtime.padding.bucket(N)`` rows as the fit was, when
    the fit was padded (``ModelSpec.pads_fit``): predictions then compile once per bucket of N,
    and the padded rows change nothing. As given for a fit that was not padded."""
    spec = result.spec
    options = result.settings.get("method_options", {})
    if DEVICES_OPTION in options or not spec.pads_fit(result.method, options):
        return result.data, latent
    num_points = int(np.shape(result.data.X)[0])
    size = bucket(num_points)
    if latent is not None:
        latent = pad_rows(latent, size, axis=-2)
    return spec.pad(result.data, size), latent


# ------------------------------------------------------------ jitted draw kernels
@functools.partial(jit, static_argnames=("spec", "num_chains", "num_draws", "shared"))
def _point_conjugate_draws(key, spec, kernel, data, hypers, Xs, num_chains, num_draws,
                           shared):
    """Predictive marginal draws with fixed hyperparameters: one conditioning for all,
    f*_s = mean + sqrt(var) eps_s, (chain, draw, n, L)."""
    posterior = spec.conjugate.condition(data, kernel, hypers)
    mean, var = spec.conjugate.predict(data, kernel, hypers, posterior, Xs)
    eps = _standard_normals(key, (num_chains, num_draws) + mean.shape, shared)
    return mean + jnp.sqrt(var) * eps


@functools.partial(jit, static_argnames=("spec", "num_samples", "num_latent", "shared"))
def _per_draw_conjugate_draws(key, spec, kernel, data, flat, Xs, num_samples, num_latent,
                              shared):
    """One predictive draw per hyperparameter draw (S = ``num_samples``), conditioning the
    GP on the Gaussian targets with each draw's hyperparameters, (S, n, L)."""
    eps = _standard_normals(key, (num_samples, Xs.shape[0], num_latent), shared)

    def one(args):
        hypers, e = args
        posterior = spec.conjugate.condition(data, kernel, hypers)
        mean, var = spec.conjugate.predict(data, kernel, hypers, posterior, Xs)
        return mean + jnp.sqrt(var) * e

    return lax.map(one, (flat, eps))


@functools.partial(jit, static_argnames=("spec", "shared"))
def _per_draw_latent_draws(key, spec, kernel, data, flat, flat_f, Xs, shared):
    """One predictive draw per posterior draw (hyperparameters, f) (S, N, L): the GP
    prior conditional given that draw's f at the training inputs, (S, n, L)."""
    eps = _standard_normals(key, (flat_f.shape[0], Xs.shape[0], flat_f.shape[-1]), shared)

    def one(args):
        hypers, f, e = args
        mean, var = spec.latent.latent_conditional(data, kernel, hypers, f, Xs)
        return mean + jnp.sqrt(var) * e

    return lax.map(one, (flat, flat_f, eps))


@functools.partial(jit, static_argnames=("spec", "shared"))
def _point_latent_draws(key, spec, kernel, data, hypers, flat_f, Xs, shared):
    """``_per_draw_latent_draws`` when the hyperparameters are one point: f*_s = mean(f_s)
    + sqrt(var) eps_s for every posterior draw f_s (S, N, L) at once, (S, n, L). ``vmap``
    over the draws batches only what depends on f_s (K^-1 f_s as one solve with S L
    right-hand sides); the Cholesky factor of K, K*n and the variance are computed once."""
    eps = _standard_normals(key, (flat_f.shape[0], Xs.shape[0], flat_f.shape[-1]), shared)
    mean, var = jax.vmap(
        lambda f: spec.latent.latent_conditional(data, kernel, hypers, f, Xs))(flat_f)
    return mean + jnp.sqrt(var) * eps


@functools.partial(jit, static_argnames=("spec", "shared"))
def _inducing_draws(key, spec, kernel, data, hypers, v, Xs, shared):
    """(S, n, L) draws of the latent at Xs, one per whitened inducing draw v (S, M, L).
    ``inducing_latent`` uses eps elementwise, so a broadcast shared eps is exact."""
    eps = _standard_normals(key, v.shape[:1] + (Xs.shape[0], v.shape[-1]), shared)
    return spec.inducing.inducing_latent(data, kernel, hypers, v, Xs, eps)


@functools.partial(jit, static_argnames=("log_link",))
def _probabilities(log_link, f):
    """p(y* = c | f*_s), (chain, draw, n, C)."""
    return jnp.exp(log_link(f))


@functools.partial(jit, static_argnames=("log_link",))
def _mean_probabilities(log_link, f):
    """(1/S) sum_s p(y* = c | f*_s), (n, C)."""
    return jnp.mean(jnp.exp(log_link(f)), axis=(0, 1))


# ------------------------------------------------------- one function per kind
def conjugate_draws(result, key, Xs, num_draws=None, shared=False) -> jax.Array:
    """Kind ``"conjugate"``: condition the GP on the Gaussian targets with each draw's
    hyperparameters and sample the predictive marginal, (chain, draw, n, L). A point
    estimate conditions once and can be sampled ``num_draws`` times (default: the fit's
    number of draws); sampled hyperparameters give one predictive draw each."""
    data, _ = padded_training(result)
    if result.point_hypers:
        return _point_conjugate_draws(
            key, result.spec, result.kernel, data, result.hyper_draw(0, 0), Xs,
            result.num_chains, result.num_draws if num_draws is None else num_draws, shared)
    return _unflatten(result, _per_draw_conjugate_draws(
        key, result.spec, result.kernel, data, flat_hypers(result), Xs,
        result.num_chains * result.num_draws, result.spec.num_latent(result.num_classes),
        shared))


def latent_draws(result, key, Xs, num_draws=None, shared=False) -> jax.Array:
    """Kind ``"latent"``: the GP prior conditional p(f* | f_s) given each draw's f at the
    training inputs, one predictive draw per posterior draw, (chain, draw, n, L)
    (``num_draws`` does not apply)."""
    data, latent = padded_training(result, result.latent)
    flat_f = _flat(latent)  # reshaped at the padded size: one program per bucket
    if result.point_hypers:
        draws = _point_latent_draws(key, result.spec, result.kernel, data,
                                    result.hyper_draw(0, 0), flat_f, Xs, shared)
    else:
        draws = _per_draw_latent_draws(key, result.spec, result.kernel, data,
                                       flat_hypers(result), flat_f, Xs, shared)
    return _unflatten(result, draws)


def inducing_draws(result, key, Xs, num_draws=None, shared=False) -> jax.Array:
    """Kind ``"inducing"``: the sparse conditional p(f* | v_s) given each whitened inducing
    draw, then the model's mixing if it has one (``spec.inducing.inducing_latent``), with
    the point hyperparameters, (chain, draw, n, L) (``num_draws`` does not apply)."""
    data, _ = padded_training(result)
    inducing_mask = data.inducing_mask
    if inducing_mask is None:
        hypers, v = result.hyper_draw(0, 0), _flat(result.inducing)
    else:  # padded with the rows, as the fit was (on the host: no program per M)
        size = int(np.shape(inducing_mask)[0])
        v = np.asarray(result.inducing)
        v = pad_rows(v.reshape((-1,) + v.shape[2:]), size, axis=-2)
        hypers = {k: jax.device_put(np.asarray(h)[0, 0]) for k, h in result.hypers.items()}
        hypers["inducing_inputs"] = pad_rows(np.asarray(hypers["inducing_inputs"]), size,
                                             axis=-2)
    return _unflatten(result, _inducing_draws(key, result.spec, result.kernel, data, hypers,
                                              v, Xs, shared))


DRAWS_BY_KIND: dict[str, Callable] = {
    "conjugate": conjugate_draws,
    "latent": latent_draws,
    "inducing": inducing_draws,
}
"""Predictive kind -> its draw function ``(result, key, Xs, num_draws, shared)``."""


def block_draws(result, key, Xs, num_draws=None, *, shared=False) -> jax.Array:
    """(chain, draw, n, L) latent draws at one (padded) block of inputs, by the result's
    kind. With ``shared``, every row uses the same standard normals (from ``key`` alone,
    whatever the block), so a row's draws do not depend on the other rows; otherwise rows
    get independent draws."""
    return DRAWS_BY_KIND[result.predictive_kind](result, key, Xs, num_draws, shared)


# ---------------------------------------------------------------- predictions
def _key(result, key, tag: int) -> jax.Array:
    return stream_key(result.seed, tag) if key is None else key


def predict_latent(result, Xs, key: jax.Array | None = None, *,
                   shared: bool = False) -> jax.Array:
    """(chain, draw, n, L) posterior draws of the latent at new inputs Xs (n, D), each row
    drawn from its per-draw marginal predictive p(f*_i | draw s).

    ``shared=False``: each row's draws independent of the others' (key: default
    ``stream_key(seed, LATENT_TAG)``, folded with the block index). ``shared=True``: every
    row uses the same standard normals (shape (chain, draw, 1, L); key: default
    ``stream_key(seed, PROBA_TAG)``), the draws ``predict_proba_draws`` and
    ``predict_proba`` average, so the link of these draws averaged over them is
    ``predict_proba`` (where the fit holds at least ``MIN_PREDICTIVE_DRAWS`` draws or is
    not a point-hyperparameter conjugate fit): the export's predictions use them."""
    Xs = np.asarray(Xs, dtype=np.float64)
    L = result.spec.num_latent(result.num_classes)
    if shared:
        key = _key(result, key, PROBA_TAG)
        return jax.device_put(_map_blocks(
            Xs, lambda i, block: block_draws(result, key, block, shared=True),
            (result.num_chains, result.num_draws, 0, L)))
    key = _key(result, key, LATENT_TAG)
    return jax.device_put(_map_blocks(
        Xs, lambda i, block: block_draws(result, jax.random.fold_in(key, i), block),
        (result.num_chains, result.num_draws, 0, L)))


def predict_proba_draws(result, Xs, key: jax.Array | None = None) -> jax.Array:
    """(chain, draw, n, C) class probabilities p(y* = c | f*_s), one per posterior draw,
    every row using the same standard normals (shape (chain, draw, 1, L), from ``key``,
    default ``stream_key(seed, PROBA_TAG)``): a row's values do not depend on the other
    rows of the call or their order."""
    Xs = np.asarray(Xs, dtype=np.float64)
    key = _key(result, key, PROBA_TAG)
    return jax.device_put(_map_blocks(
        Xs, lambda i, block: _probabilities(
            result.spec.log_link, block_draws(result, key, block, shared=True)),
        (result.num_chains, result.num_draws, 0, result.num_classes)))


def predict_proba(result, Xs, key: jax.Array | None = None) -> np.ndarray:
    """(n, C) predictive class probabilities (1/S) sum_s p(y* = c | f*_s), the average of
    ``predict_proba_draws`` (point-hyperparameter conjugate fits average over at least
    ``MIN_PREDICTIVE_DRAWS`` predictive draws). Raises ``FloatingPointError`` naming the
    rows whose probabilities are not finite."""
    Xs = check_features(Xs, num_features=result.data.X.shape[1])
    key = _key(result, key, PROBA_TAG)
    num_draws = max(result.num_draws, MIN_PREDICTIVE_DRAWS)
    probs = _map_blocks(
        Xs, lambda i, block: _mean_probabilities(
            result.spec.log_link, block_draws(result, key, block, num_draws, shared=True)),
        (0, result.num_classes))
    bad = ~np.all(np.isfinite(probs), axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise FloatingPointError(
            f"the predictive probabilities of {rows.size} input(s) (first: "
            f"{rows[:5].tolist()}) are not finite; the posterior itself may be broken "
            "(check its draws for NaN)")
    return probs / probs.sum(axis=1, keepdims=True)


def training_latent(result, key: jax.Array | None = None, start: int = 0,
                    stop: int | None = None, block: int = 0) -> jax.Array:
    """(chain, draw, n, L) latent draws at the training inputs ``X[start:stop]``: the stored
    ``latent`` when there is one; otherwise (kind ``"inducing"``) one draw of p(f | v) per
    stored v, independent across rows, from ``fold_in(key, block + i)`` for the i-th block
    of ``PREDICT_BLOCK`` rows (default key ``stream_key(seed, TRAINING_TAG)``), so the same
    key and blocks give the same draws to the log-likelihood and the export."""
    if result.latent is not None:
        return result.latent[:, :, start:stop]
    key = _key(result, key, TRAINING_TAG)
    X = np.asarray(result.data.X, dtype=np.float64)[start:stop]
    return jax.device_put(_map_blocks(
        X, lambda i, padded: block_draws(result, jax.random.fold_in(key, block + i), padded),
        (result.num_chains, result.num_draws, 0, result.spec.num_latent(result.num_classes))))


def log_likelihood(result) -> jax.Array:
    """(chain, draw, N) pointwise categorical log-likelihood log p(y_i | f_i^(s)): the
    density of the observed labels, comparable across models (unlike the Gaussian density
    of the transformed targets that ILR-GP and GPD observe internally)."""
    y = jnp.asarray(result.data.y)
    if result.latent is not None:
        logp = result.spec.log_link(result.latent)  # (chain, draw, N, C)
        return jnp.take_along_axis(logp, y[None, None, :, None], axis=-1)[..., 0]
    out = []
    for i, start in enumerate(range(0, y.shape[0], PREDICT_BLOCK)):
        f = training_latent(result, None, start, start + PREDICT_BLOCK, block=i)
        logp = result.spec.log_link(f)
        yb = y[start:start + PREDICT_BLOCK]
        out.append(jnp.take_along_axis(logp, yb[None, None, :, None], axis=-1)[..., 0])
    return jnp.concatenate(out, axis=2)
