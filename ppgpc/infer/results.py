"""``FitResult``: the posterior that every method returns, in one frozen form, and its
predictions.

Whatever the method, a fitted classifier is held as

* ``hypers``: hyperparameter draws by site name, shaped (chain, draw, ...). Point estimates
  (type-II ML, MAP) are one chain with one draw and ``point_hypers`` is True;
* ``latent``: draws of the latent f at the training inputs, (chain, draw, N, L), or None
  for kind ``"inducing"``;
* ``inducing``: for kind ``"inducing"`` only, draws of the whitened inducing values v
  (chain, draw, M, L) of a sparse variational fit (SVGP, docs/math.md section 4, or the
  logistic-softmax GP's sparse CAVI, section 3);
* ``predictive_kind``: how a draw turns into latent values at new inputs:
  ``"conjugate"`` (condition the GP on the Gaussian targets with that draw's hyperparameters
  and sample the predictive marginal), ``"latent"`` (the GP prior conditional given that
  draw's f at the training inputs) or ``"inducing"`` (the sparse conditional p(f* | v)
  given that draw of v, then the model's mixing if it has one, through
  ``spec.inducing.inducing_latent``, with the point hyperparameters, inducing inputs and
  any mixing matrix in ``hypers``). The latent
  at the training inputs of an ``"inducing"`` fit is computed on demand, block by block
  (``training_latent``), so that N x draws x L floats are never stored.

Class probabilities are always averages over posterior draws of the likelihood,
p(y* = c | data) ~= (1/S) sum_s p(y* = c | f*_s), never a plug-in at a posterior mean.

Prediction, for every kind:

* Shape-stable: rows go through blocks of ``PREDICT_BLOCK`` rows, each padded with copies
  of its first row to one of two sizes, ``MIN_BUCKET`` (64) or ``PREDICT_BLOCK`` (512), and
  the padding dropped after, so a new number of rows compiles nothing once its size has
  been compiled: any sequence of calls compiles at most two programs per function.
* Batch-independent probabilities: ``predict_proba`` and ``predict_proba_draws`` draw
  f*_s = mean_s + sqrt(var_s) eps_s with one standard normal eps_s (chain, draw, 1, L)
  shared by every row. Each row's predictive probability is a marginal expectation, which
  correlation across rows does not change, and a row's result is then the same (to
  rounding) alone, in any batch and in any order.
* Independent latent draws: ``predict_latent`` and ``training_latent`` (what the export
  reads as posterior draws of f) draw each row's eps independently.
* Keys: one root ``PRNGKey(seed)``, one stream per use by ``fold_in(root, tag)``
  (``_PROBA_TAG``, ``_LATENT_TAG``, ``_TRAINING_TAG``), folded again with the block index
  for the per-row draws; so a loaded result predicts bit for bit what the saved one did.

Everything needed to rebuild predictions is stored as arrays plus names, so a result can
be saved to netCDF/JSON and loaded without pickle. This module holds the container and its
predictions only: the ArviZ export is ``ppgpc.infer.to_inference_data(result)``, saving and
loading ``ppgpc.save(result, path)`` and ``ppgpc.load(path)`` (``ppgpc.persistence``), all
in modules above this one.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppgpc.spec import ModelSpec
from ppgpc.validation import check_features

__all__ = ["FitResult", "stream_key", "EXPORT_TAG", "TRACE_STATS"]

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

TRACE_STATS = ("elbo", "loss")
"""Sample statistics that are optimisation traces, shaped (chain, iteration), not per draw."""

# Tags folded into ``PRNGKey(seed)``: one stream per use, each fixed by the fit's seed.
_PROBA_TAG = 1  # the standard normals shared by every row of predict_proba(_draws)
_LATENT_TAG = 2  # per-row draws of predict_latent (then folded with the block index)
_TRAINING_TAG = 3  # per-row draws of the training latent of an "inducing" fit (likewise)
EXPORT_TAG = 4  # the ArviZ export's draws (ppgpc.infer.arviz_export)


def stream_key(seed: int, tag: int) -> jax.Array:
    """The key of one use of a fit's randomness: ``fold_in(PRNGKey(seed), tag)``, one stream
    per tag (``EXPORT_TAG`` for the ArviZ export; predictions use tags 1 to 3)."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), tag)


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


def _standard_normals(key, shape, shared: bool):
    """(..., n, L) standard normals; with ``shared``, one (..., 1, L) draw broadcast over
    the n rows, so that a row's draws do not depend on the other rows."""
    if not shared:
        return jax.random.normal(key, shape)
    return jnp.broadcast_to(jax.random.normal(key, shape[:-2] + (1, shape[-1])), shape)


@functools.partial(jax.jit, static_argnames=("spec", "num_chains", "num_draws", "shared"))
def _point_conjugate_draws(key, spec, kernel, data, hypers, Xs, num_chains, num_draws,
                           shared):
    """Predictive marginal draws with fixed hyperparameters: one conditioning for all,
    f*_s = mean + sqrt(var) eps_s, (chain, draw, n, L)."""
    posterior = spec.conjugate.condition(data, kernel, hypers)
    mean, var = spec.conjugate.predict(data, kernel, hypers, posterior, Xs)
    eps = _standard_normals(key, (num_chains, num_draws) + mean.shape, shared)
    return mean + jnp.sqrt(var) * eps


@functools.partial(jax.jit, static_argnames=("spec", "kind", "shared"))
def _per_draw_predictive(key, spec, kernel, data, flat_hypers, flat_f, Xs, kind, shared):
    """One predictive draw per posterior draw, (S, n, L): condition per hyperparameter draw
    (``kind="conjugate"``) or take the GP conditional given that draw's f (``"latent"``)."""
    L = flat_f.shape[-1]
    eps = _standard_normals(key, (flat_f.shape[0], Xs.shape[0], L), shared)

    def one(args):
        hypers, f, e = args
        if kind == "conjugate":
            posterior = spec.conjugate.condition(data, kernel, hypers)
            mean, var = spec.conjugate.predict(data, kernel, hypers, posterior, Xs)
        else:
            mean, var = spec.latent.latent_conditional(data, kernel, hypers, f, Xs)
        return mean + jnp.sqrt(var) * e

    return lax.map(one, (flat_hypers, flat_f, eps))


@functools.partial(jax.jit, static_argnames=("spec", "shared"))
def _point_latent_draws(key, spec, kernel, data, hypers, flat_f, Xs, shared):
    """``_per_draw_predictive``'s ``"latent"`` draws when the hyperparameters are one point:
    f*_s = mean(f_s) + sqrt(var) eps_s for every posterior draw f_s (S, N, L) at once,
    (S, n, L). ``vmap`` over the draws batches only what depends on f_s (K^-1 f_s as one
    solve with S L right-hand sides); the Cholesky factor of K, K*n and the variance are
    computed once, not once per draw."""
    eps = _standard_normals(key, (flat_f.shape[0], Xs.shape[0], flat_f.shape[-1]), shared)
    mean, var = jax.vmap(
        lambda f: spec.latent.latent_conditional(data, kernel, hypers, f, Xs))(flat_f)
    return mean + jnp.sqrt(var) * eps


@functools.partial(jax.jit, static_argnames=("spec", "shared"))
def _inducing_predictive(key, spec, kernel, data, hypers, v, Xs, shared):
    """(S, n, L) draws of the latent at Xs, one per whitened inducing draw v (S, M, L).
    ``inducing_latent`` uses eps elementwise, so a broadcast shared eps is exact."""
    eps = _standard_normals(key, v.shape[:1] + (Xs.shape[0], v.shape[-1]), shared)
    return spec.inducing.inducing_latent(data, kernel, hypers, v, Xs, eps)


@functools.partial(jax.jit, static_argnames=("log_link",))
def _probabilities(log_link, f):
    """p(y* = c | f*_s), (chain, draw, n, C)."""
    return jnp.exp(log_link(f))


@functools.partial(jax.jit, static_argnames=("log_link",))
def _mean_probabilities(log_link, f):
    """(1/S) sum_s p(y* = c | f*_s), (n, C)."""
    return jnp.mean(jnp.exp(log_link(f)), axis=(0, 1))


@dataclasses.dataclass(frozen=True)
class FitResult:
    """A fitted classifier: posterior draws plus what is needed to predict (frozen: ``thin``
    and ``dataclasses.replace`` make changed copies).

    Attributes:
        spec: the model's ``ModelSpec``.
        kernel: the kernel object.
        data: the model's prepared training data.
        method: the inference method that produced it.
        hypers: hyperparameter draws by site name, (chain, draw, ...).
        latent: (chain, draw, N, L) latent draws at the training inputs (None for
            ``"inducing"``).
        predictive_kind: ``"conjugate"``, ``"latent"`` or ``"inducing"`` (module docstring).
        point_hypers: hyperparameters are a point estimate (one chain, one draw).
        sample_stats: per-draw statistics (chain, draw), ArviZ names.
        settings: JSON-serialisable settings of the fit (method and model options).
        info: JSON-serialisable facts about the run (timing, jitter, optimiser result).
        seed: the integer seed the run started from.
        inducing: (chain, draw, M, L) whitened inducing draws (kind ``"inducing"`` only).
    """

    spec: ModelSpec
    kernel: Any
    data: Any
    method: str
    hypers: dict
    latent: jax.Array
    predictive_kind: str
    point_hypers: bool
    sample_stats: dict = dataclasses.field(default_factory=dict)
    settings: dict = dataclasses.field(default_factory=dict)
    info: dict = dataclasses.field(default_factory=dict)
    seed: int = 0
    inducing: Any = None

    # ----------------------------------------------------------------- shapes
    @property
    def num_classes(self) -> int:
        """C."""
        return int(self.data.num_classes)

    @property
    def num_chains(self) -> int:
        return int(self._draws.shape[0])

    @property
    def num_draws(self) -> int:
        return int(self._draws.shape[1])

    @property
    def _draws(self):
        return self.inducing if self.predictive_kind == "inducing" else self.latent

    def hyper_draw(self, chain: int = 0, draw: int = 0) -> dict:
        """The hyperparameters of one posterior draw by site name (the point values of a
        ``point_hypers`` fit at the default chain 0, draw 0)."""
        return {k: v[chain, draw] for k, v in self.hypers.items()}

    def _key(self, tag: int) -> jax.Array:
        """The default key of one use (``_PROBA_TAG``, ...): ``stream_key(seed, tag)``."""
        return stream_key(self.seed, tag)

    def _flat_hypers(self) -> dict:
        C, S = self.num_chains, self.num_draws
        return {
            k: jnp.broadcast_to(v, (C, S) + v.shape[2:]).reshape((C * S,) + v.shape[2:])
            for k, v in self.hypers.items()
        }

    # ------------------------------------------------------------ predictions
    def _latent_draws_block(self, key: jax.Array, Xs, num_draws: int | None = None, *,
                            shared: bool = False):
        """(chain, draw, n, L) latent draws at one (padded) block of inputs.

        ``num_draws`` only applies to point-hyperparameter conjugate fits, whose predictive
        is a closed-form Gaussian that can be sampled any number of times; otherwise there
        is one predictive draw per posterior draw. With ``shared``, every row uses the same
        standard normals (drawn from ``key`` alone, whatever the block), so a row's draws
        do not depend on the other rows; otherwise rows get independent draws.
        """
        if self.predictive_kind == "inducing":
            v = self.inducing.reshape((-1,) + self.inducing.shape[2:])
            draws = _inducing_predictive(key, self.spec, self.kernel, self.data,
                                         self.hyper_draw(0, 0), v, Xs, shared)
            return draws.reshape((self.num_chains, self.num_draws) + draws.shape[1:])
        if self.predictive_kind == "conjugate" and self.point_hypers:
            return _point_conjugate_draws(
                key, self.spec, self.kernel, self.data, self.hyper_draw(0, 0), Xs,
                self.num_chains, self.num_draws if num_draws is None else num_draws, shared,
            )
        flat_f = self.latent.reshape((-1,) + self.latent.shape[2:])
        if self.predictive_kind == "latent" and self.point_hypers:
            draws = _point_latent_draws(key, self.spec, self.kernel, self.data,
                                        self.hyper_draw(0, 0), flat_f, Xs, shared)
            return draws.reshape((self.num_chains, self.num_draws) + draws.shape[1:])
        draws = _per_draw_predictive(
            key, self.spec, self.kernel, self.data, self._flat_hypers(), flat_f, Xs,
            self.predictive_kind, shared,
        )
        return draws.reshape((self.num_chains, self.num_draws) + draws.shape[1:])

    def _map_blocks(self, Xs: np.ndarray, block_fn, empty_shape: tuple) -> np.ndarray:
        """``block_fn(i, padded block)`` over the padded blocks of Xs, the padding rows
        dropped and the blocks joined on axis -2 (rows), on the host so that no new
        number of rows compiles anything (callers return it with ``jax.device_put``, which
        compiles nothing, where ``jnp.asarray`` compiles a copy per shape)."""
        out = [np.asarray(block_fn(i, block))[..., :stop - start, :]
               for i, (start, stop, block) in enumerate(_blocks(Xs))]
        return np.concatenate(out, axis=-2) if out else np.zeros(empty_shape)

    def predict_latent(self, Xs, key: jax.Array | None = None) -> jax.Array:
        """Posterior draws of the latent at new inputs.

        Each row's draws are independent of the other rows' (given the posterior draw), as
        for ``training_latent``: they are the per-draw marginal predictive, which the
        export reads as posterior draws of f*. (``predict_proba`` instead shares its
        standard normals across rows.) Inputs are padded to a fixed set of block sizes
        (``MIN_BUCKET``), so a new number of rows compiles nothing; a row's draws depend on
        its position, not on the values of the other rows.

        Args:
            Xs: (n, D) inputs, in the same (already transformed) space as the training X.
            key: PRNG key (default: ``fold_in(PRNGKey(seed), _LATENT_TAG)``), folded with
                the block index.

        Returns:
            (chain, draw, n, L) draws.
        """
        Xs = np.asarray(Xs, dtype=np.float64)
        key = self._key(_LATENT_TAG) if key is None else key
        L = self.spec.num_latent(self.num_classes)
        return jax.device_put(self._map_blocks(
            Xs, lambda i, block: self._latent_draws_block(jax.random.fold_in(key, i), block),
            (self.num_chains, self.num_draws, 0, L)))

    def predict_proba_draws(self, Xs, key: jax.Array | None = None) -> jax.Array:
        """(chain, draw, n, C) class probabilities p(y* = c | f*_s), one per posterior draw.

        Every row uses the same standard normals (shape (chain, draw, 1, L), from ``key``,
        default ``fold_in(PRNGKey(seed), _PROBA_TAG)``), so a row's values do not depend on
        the other rows of the call or their order; the mean over draws is each row's
        predictive probability, a marginal expectation that correlation across rows does
        not change. Read rows jointly through ``predict_latent`` instead.
        """
        Xs = np.asarray(Xs, dtype=np.float64)
        key = self._key(_PROBA_TAG) if key is None else key
        return jax.device_put(self._map_blocks(
            Xs, lambda i, block: _probabilities(
                self.spec.log_link, self._latent_draws_block(key, block, shared=True)),
            (self.num_chains, self.num_draws, 0, self.num_classes)))

    def predict_proba(self, Xs, key: jax.Array | None = None) -> np.ndarray:
        """(n, C) predictive class probabilities, the average of ``predict_proba_draws``.

        Point-hyperparameter conjugate fits average over at least ``MIN_PREDICTIVE_DRAWS``
        predictive draws. The standard normals are shared by all rows (as in
        ``predict_proba_draws``), so a row's probabilities are the same whether it is
        predicted alone, in a batch or in another order; inputs go through padded blocks
        (``PREDICT_BLOCK``, ``MIN_BUCKET``), so memory stays at O(chains x draws x block x
        C) and a new number of rows compiles nothing.

        Args:
            Xs: (n, D) inputs, in the same (already transformed) space as the training X.
            key: PRNG key of the shared draws (default
                ``fold_in(PRNGKey(seed), _PROBA_TAG)``).
        """
        Xs = check_features(Xs, num_features=self.data.X.shape[1])
        key = self._key(_PROBA_TAG) if key is None else key
        num_draws = max(self.num_draws, MIN_PREDICTIVE_DRAWS)
        probs = self._map_blocks(
            Xs, lambda i, block: _mean_probabilities(
                self.spec.log_link,
                self._latent_draws_block(key, block, num_draws, shared=True)),
            (0, self.num_classes))
        bad = ~np.all(np.isfinite(probs), axis=1)
        if bad.any():
            rows = np.flatnonzero(bad)
            raise FloatingPointError(
                f"the predictive probabilities of {rows.size} input(s) (first: "
                f"{rows[:5].tolist()}) are not finite; the posterior itself may be broken "
                "(check its draws for NaN)")
        return probs / probs.sum(axis=1, keepdims=True)

    # --------------------------------------------------------- log-likelihood
    def log_likelihood(self) -> jax.Array:
        """(chain, draw, N) pointwise categorical log-likelihood log p(y_i | f_i^(s)).

        This is the density of the observed labels, comparable across models (unlike the
        Gaussian density of transformed targets that ILR-GP and GPD observe internally).
        """
        y = jnp.asarray(self.data.y)
        if self.latent is not None:
            logp = self.spec.log_link(self.latent)  # (chain, draw, N, C)
            return jnp.take_along_axis(logp, y[None, None, :, None], axis=-1)[..., 0]
        out = []
        for i, start in enumerate(range(0, y.shape[0], PREDICT_BLOCK)):
            f = self.training_latent(None, start, start + PREDICT_BLOCK, block=i)
            logp = self.spec.log_link(f)
            yb = y[start:start + PREDICT_BLOCK]
            out.append(jnp.take_along_axis(logp, yb[None, None, :, None], axis=-1)[..., 0])
        return jnp.concatenate(out, axis=2)

    def training_latent(self, key: jax.Array | None = None, start: int = 0,
                        stop: int | None = None, block: int = 0) -> jax.Array:
        """(chain, draw, n, L) latent draws at the training inputs ``X[start:stop]``.

        The stored ``latent`` when there is one; for an ``"inducing"`` fit, one draw of
        p(f | v) per stored draw of v, independent across rows (posterior draws, not the
        shared draws of ``predict_proba``), from ``fold_in(key, block)`` (default key
        ``fold_in(PRNGKey(seed), _TRAINING_TAG)``): the same key and block give the same
        draws, so the log-likelihood and the exported posterior agree. More than
        ``PREDICT_BLOCK`` rows go through blocks ``block``, ``block + 1``, ..., so
        ``training_latent()`` equals the blockwise draws of the log-likelihood; rows are
        padded to their bucket (``MIN_BUCKET``) like predictions.
        """
        if self.latent is not None:
            return self.latent[:, :, start:stop]
        key = self._key(_TRAINING_TAG) if key is None else key
        X = np.asarray(self.data.X, dtype=np.float64)[start:stop]
        return jax.device_put(self._map_blocks(
            X, lambda i, padded: self._latent_draws_block(jax.random.fold_in(key, block + i),
                                                          padded),
            (self.num_chains, self.num_draws, 0, self.spec.num_latent(self.num_classes))))

    def thin(self, step: int) -> "FitResult":
        """A copy that keeps every ``step``-th draw of every chain (draws 0, step, 2 step, ...).

        Thins the latent or inducing draws, per-draw hyperparameters and per-draw sample
        statistics alike (optimisation traces such as the ELBO are kept whole), so the copy
        predicts with the kept draws only. Point-hyperparameter conjugate fits, whose
        predictive is re-sampled in closed form, keep their number of predictive draws for
        ``predict_proba`` (``MIN_PREDICTIVE_DRAWS`` at least) but export fewer. For an
        ``"inducing"`` fit the latent at the training inputs, drawn from p(f | v) when
        needed (f, and u at the inducing inputs), is a fresh draw for each kept v.

        Args:
            step: a positive integer; 1 returns ``self``.
        """
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
            raise ValueError(f"thin step must be a positive integer; got {step!r}")
        if step == 1:
            return self
        draws = self.num_draws

        def per_draw(value):
            value = jnp.asarray(value)
            return value[:, ::step] if value.ndim >= 2 and value.shape[1] == draws else value

        return dataclasses.replace(
            self,
            latent=None if self.latent is None else self.latent[:, ::step],
            inducing=None if self.inducing is None else self.inducing[:, ::step],
            hypers={k: per_draw(v) for k, v in self.hypers.items()},
            sample_stats={k: (v if k in TRACE_STATS else per_draw(v))
                          for k, v in self.sample_stats.items()},
            info={**self.info, "thinned_by": int(step) * int(self.info.get("thinned_by", 1))},
        )
