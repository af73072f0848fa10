"""``FitResult``: the posterior that every method returns, in one form.

Whatever the method, a fitted classifier is held as

* ``hypers``: hyperparameter draws by site name, shaped (chain, draw, ...). Point estimates
  (type-II ML, MAP) are one chain with one draw and ``point_hypers`` is True;
* ``latent``: draws of the latent f at the training inputs, (chain, draw, N, L), or None
  for kind ``"inducing"``;
* ``inducing``: for kind ``"inducing"`` only, draws of the whitened inducing values v
  (chain, draw, M, L) of a sparse variational fit (SVGP, MATH.md section 4, or the
  logistic-softmax GP's sparse CAVI, section 3);
* ``predictive_kind``: how a draw turns into latent values at new inputs:
  ``"conjugate"`` (condition the GP on the Gaussian targets with that draw's hyperparameters
  and sample the predictive marginal), ``"latent"`` (the GP prior conditional given that
  draw's f at the training inputs) or ``"inducing"`` (the sparse conditional p(f* | v)
  given that draw of v, then the model's mixing if it has one, through
  ``spec.extras["inducing_latent"]``, with the point hyperparameters, inducing inputs and
  any mixing matrix in ``hypers``). The latent
  at the training inputs of an ``"inducing"`` fit is computed on demand, block by block
  (``training_latent``), so that N x draws x L floats are never stored.

Class probabilities are always averages over posterior draws of the likelihood,
p(y* = c | data) ~= (1/S) sum_s p(y* = c | f*_s), never a plug-in at a posterior mean.
Everything needed to rebuild predictions is stored as arrays plus names, so a result can
be saved to netCDF/JSON and loaded without pickle.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppgpc.infer.spec import ModelSpec
from ppgpc.validation import check_features

__all__ = ["FitResult"]

_PREDICT_CHUNK = 512
MIN_PREDICTIVE_DRAWS = 1000

TRACE_STATS = ("elbo", "loss")
"""Sample statistics that are optimisation traces, shaped (chain, iteration), not per draw."""
"""``predict_proba`` of a point-hyperparameter conjugate fit averages over at least this
many predictive draws, however few training-latent draws the fit stored."""


@functools.partial(jax.jit, static_argnames=("spec", "num_chains", "num_draws"))
def _point_conjugate_draws(key, spec, kernel, data, hypers, Xs, num_chains, num_draws):
    """Predictive marginal draws with fixed hyperparameters: one conditioning for all."""
    posterior = spec.condition(data, kernel, hypers)
    mean, var = spec.predict(data, kernel, hypers, posterior, Xs)
    eps = jax.random.normal(key, (num_chains, num_draws) + mean.shape)
    return mean + jnp.sqrt(var) * eps


@functools.partial(jax.jit, static_argnames=("spec", "kind"))
def _per_draw_predictive(key, spec, kernel, data, flat_hypers, flat_f, Xs, kind):
    """One predictive draw per posterior draw, (S, n, L): condition per hyperparameter draw
    (``kind="conjugate"``) or take the GP conditional given that draw's f (``"latent"``)."""
    keys = jax.random.split(key, flat_f.shape[0])

    def one(args):
        hypers, f, k = args
        if kind == "conjugate":
            posterior = spec.condition(data, kernel, hypers)
            mean, var = spec.predict(data, kernel, hypers, posterior, Xs)
        else:
            mean, var = spec.latent_conditional(data, kernel, hypers, f, Xs)
        return mean + jnp.sqrt(var) * jax.random.normal(k, mean.shape)

    return lax.map(one, (flat_hypers, flat_f, keys))


@functools.partial(jax.jit, static_argnames=("spec",))
def _inducing_predictive(key, spec, kernel, data, hypers, v, Xs):
    """(S, n, L) draws of the latent at Xs, one per whitened inducing draw v (S, M, L)."""
    eps = jax.random.normal(key, v.shape[:1] + (Xs.shape[0], v.shape[-1]))
    return spec.extras["inducing_latent"](data, kernel, hypers, v, Xs, eps)


@dataclasses.dataclass
class FitResult:
    """A fitted classifier: posterior draws plus what is needed to predict.

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

    def _hyper_draw(self, chain: int, draw: int) -> dict:
        return {k: v[chain, draw] for k, v in self.hypers.items()}

    def _flat_hypers(self) -> dict:
        C, S = self.num_chains, self.num_draws
        return {
            k: jnp.broadcast_to(v, (C, S) + v.shape[2:]).reshape((C * S,) + v.shape[2:])
            for k, v in self.hypers.items()
        }

    # ------------------------------------------------------------ predictions
    def _latent_draws_block(self, key: jax.Array, Xs: jax.Array, num_draws: int | None = None):
        """(chain, draw, n, L) latent draws at one block of inputs.

        ``num_draws`` only applies to point-hyperparameter conjugate fits, whose predictive
        is a closed-form Gaussian that can be sampled any number of times; otherwise there
        is one predictive draw per posterior draw.
        """
        if self.predictive_kind == "inducing":
            v = self.inducing.reshape((-1,) + self.inducing.shape[2:])
            draws = _inducing_predictive(key, self.spec, self.kernel, self.data,
                                         self._hyper_draw(0, 0), v, Xs)
            return draws.reshape((self.num_chains, self.num_draws) + draws.shape[1:])
        if self.predictive_kind == "conjugate" and self.point_hypers:
            return _point_conjugate_draws(
                key, self.spec, self.kernel, self.data, self._hyper_draw(0, 0), Xs,
                self.num_chains, self.num_draws if num_draws is None else num_draws,
            )
        flat_f = self.latent.reshape((-1,) + self.latent.shape[2:])
        draws = _per_draw_predictive(
            key, self.spec, self.kernel, self.data, self._flat_hypers(), flat_f, Xs,
            self.predictive_kind,
        )
        return draws.reshape((self.num_chains, self.num_draws) + draws.shape[1:])

    def predict_latent(self, Xs, key: jax.Array | None = None) -> jax.Array:
        """Posterior draws of the latent at new inputs.

        Args:
            Xs: (n, D) inputs, in the same (already transformed) space as the training X.
            key: PRNG key (defaults to one derived from ``seed``).

        Returns:
            (chain, draw, n, L) draws.
        """
        Xs = jnp.asarray(Xs, dtype=jnp.float64)
        key = jax.random.PRNGKey(self.seed + 1) if key is None else key
        blocks = [
            self._latent_draws_block(jax.random.fold_in(key, i), Xs[start:start + _PREDICT_CHUNK])
            for i, start in enumerate(range(0, Xs.shape[0], _PREDICT_CHUNK))
        ]
        return jnp.concatenate(blocks, axis=2)

    def predict_proba_draws(self, Xs, key: jax.Array | None = None) -> jax.Array:
        """(chain, draw, n, C) class probabilities p(y* = c | f*_s), one per posterior draw."""
        return jnp.exp(self.spec.log_link(self.predict_latent(Xs, key)))

    def predict_proba(self, Xs, key: jax.Array | None = None) -> np.ndarray:
        """(n, C) predictive class probabilities, the average of ``predict_proba_draws``.

        Point-hyperparameter conjugate fits average over at least ``MIN_PREDICTIVE_DRAWS``
        predictive draws. Computed block by block over the inputs so that memory stays at
        O(chains x draws x block x C).
        """
        Xs = jnp.asarray(check_features(Xs, num_features=self.data.X.shape[1]))
        key = jax.random.PRNGKey(self.seed + 1) if key is None else key
        out = []
        num_draws = max(self.num_draws, MIN_PREDICTIVE_DRAWS)
        for i, start in enumerate(range(0, Xs.shape[0], _PREDICT_CHUNK)):
            f = self._latent_draws_block(jax.random.fold_in(key, i), Xs[start:start + _PREDICT_CHUNK],
                                         num_draws)
            probs = jnp.mean(jnp.exp(self.spec.log_link(f)), axis=(0, 1))
            out.append(np.asarray(probs))
        probs = np.concatenate(out, axis=0) if out else np.zeros((0, self.num_classes))
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
        key = jax.random.PRNGKey(self.seed + 3)
        out = []
        for i, start in enumerate(range(0, y.shape[0], _PREDICT_CHUNK)):
            f = self.training_latent(key, start, start + _PREDICT_CHUNK, block=i)
            logp = self.spec.log_link(f)
            yb = y[start:start + _PREDICT_CHUNK]
            out.append(jnp.take_along_axis(logp, yb[None, None, :, None], axis=-1)[..., 0])
        return jnp.concatenate(out, axis=2)

    def training_latent(self, key: jax.Array | None = None, start: int = 0,
                        stop: int | None = None, block: int = 0) -> jax.Array:
        """(chain, draw, n, L) latent draws at the training inputs ``X[start:stop]``.

        The stored ``latent`` when there is one; for an ``"inducing"`` fit, one draw of
        p(f | v) per stored draw of v (the same key and block give the same draws, so the
        log-likelihood and the exported posterior agree).
        """
        if self.latent is not None:
            return self.latent[:, :, start:stop]
        key = jax.random.PRNGKey(self.seed + 3) if key is None else key
        return self._latent_draws_block(jax.random.fold_in(key, block),
                                        jnp.asarray(self.data.X[start:stop]))

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

    def to_inference_data(self, X_pred=None, *, key: jax.Array | None = None, **kwargs):
        """ArviZ ``InferenceData``; see ``ppgpc.infer.arviz_export.to_inference_data``."""
        from ppgpc.infer.arviz_export import to_inference_data

        return to_inference_data(self, X_pred, key=key, **kwargs)

    # ------------------------------------------------------------ persistence
    def save(self, path):
        """Save to the folder ``path`` (netCDF arrays + JSON settings; ``ppgpc.persistence``).

        Returns:
            The folder written.
        """
        from ppgpc.persistence import save_result

        return save_result(self, path)

    @classmethod
    def load(cls, path) -> "FitResult":
        """Load a result saved by ``save``; it predicts bit for bit what the saved one did."""
        from ppgpc.persistence import load_result

        return load_result(path)
