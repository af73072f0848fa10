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

Prediction, for every kind (the pure functions of ``ppgpc.infer.predictive``, one draw
function per kind in its ``DRAWS_BY_KIND``; the methods below call them):

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
  (``PROBA_TAG``, ``LATENT_TAG``, ``TRAINING_TAG``), folded again with the block index
  for the per-row draws; so a loaded result predicts bit for bit what the saved one did.

Everything needed to rebuild predictions is stored as arrays plus names, so a result can
be saved to netCDF/JSON and loaded without pickle. This module holds the container and its
predictions only: the ArviZ export is ``ppgpc.infer.to_inference_data(result)``, saving and
loading ``ppgpc.save(result, path)`` and ``ppgpc.load(path)`` (``ppgpc.io.persistence``), all
in modules above this one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppgpc.infer import predictive
from ppgpc.infer.predictive import (EXPORT_TAG, MIN_BUCKET, MIN_PREDICTIVE_DRAWS, PREDICT_BLOCK,
                                    stream_key)
from ppgpc.infer.records import FitInfo
from ppgpc.models.spec import ModelSpec

__all__ = ["FitResult", "stream_key", "EXPORT_TAG", "TRACE_STATS", "PREDICT_BLOCK",
           "MIN_BUCKET", "MIN_PREDICTIVE_DRAWS"]

TRACE_STATS = ("elbo", "loss")
"""Sample statistics that are optimisation traces, shaped (chain, iteration), not per draw."""


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
        info: what the run did (``ppgpc.infer.records.FitInfo``: how the hyperparameters
            were obtained, the ``ConvergenceReport``, timing, the optimiser's, sampler's,
            SVI's or CAVI's record).
        seed: the integer seed the run started from.
        inducing: (chain, draw, M, L) whitened inducing draws (kind ``"inducing"`` only).
        input_scaling: what maps new inputs into the space of the training X before a
            prediction (anything with ``transform(X) -> X``), or None: the inputs are used
            as given. The driver's fits have None; an estimator's ``result_`` carries the
            estimator's input scaling (``standardizer_``), so its methods take raw inputs
            as the estimator's do. Not saved: the estimator saves its own.
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
    info: FitInfo = dataclasses.field(default_factory=FitInfo)
    seed: int = 0
    inducing: Any = None
    input_scaling: Any = None

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
        return self.inducing if self.latent is None else self.latent

    def hyper_draw(self, chain: int = 0, draw: int = 0) -> dict:
        """The hyperparameters of one posterior draw by site name (the point values of a
        ``point_hypers`` fit at the default chain 0, draw 0)."""
        return {k: v[chain, draw] for k, v in self.hypers.items()}

    # ------------------------------------------------------------ predictions
    def predict_latent(self, Xs, key: jax.Array | None = None) -> jax.Array:
        """(chain, draw, n, L) posterior draws of the latent at new inputs Xs (n, D), as
        the fit's inputs were given (``input_scaling`` maps them); each row's draws
        independent of the other rows' (``ppgpc.infer.predictive.predict_latent``).
        ``key`` defaults to ``stream_key(seed, LATENT_TAG)``, folded with the block index."""
        return predictive.predict_latent(self, self.scaled_inputs(Xs), key)

    def predict_proba_draws(self, Xs, key: jax.Array | None = None) -> jax.Array:
        """(chain, draw, n, C) class probabilities p(y* = c | f*_s), one per posterior draw,
        every row using the same standard normals (default key
        ``stream_key(seed, PROBA_TAG)``), so a row's values do not depend on the other
        rows of the call or their order (``ppgpc.infer.predictive.predict_proba_draws``)."""
        return predictive.predict_proba_draws(self, self.scaled_inputs(Xs), key)

    def predict_proba(self, Xs, key: jax.Array | None = None) -> np.ndarray:
        """(n, C) predictive class probabilities, the average of ``predict_proba_draws``
        (at least ``MIN_PREDICTIVE_DRAWS`` draws for a point-hyperparameter conjugate fit);
        a row's probabilities are the same alone, in a batch or in another order, and a new
        number of rows compiles nothing (``ppgpc.infer.predictive.predict_proba``).

        Args:
            Xs: (n, D) inputs, as the fit's inputs were given (``input_scaling`` maps them
                into the space of the training X).
            key: PRNG key of the shared draws (default ``stream_key(seed, PROBA_TAG)``).
        """
        return predictive.predict_proba(self, self.scaled_inputs(Xs), key)

    def scaled_inputs(self, Xs):
        """New inputs in the space of the training X (``input_scaling``)."""
        return Xs if self.input_scaling is None else self.input_scaling.transform(Xs)

    # --------------------------------------------------------- log-likelihood
    def log_likelihood(self) -> jax.Array:
        """(chain, draw, N) pointwise categorical log-likelihood log p(y_i | f_i^(s))
        (``ppgpc.infer.predictive.log_likelihood``)."""
        return predictive.log_likelihood(self)

    def training_latent(self, key: jax.Array | None = None, start: int = 0,
                        stop: int | None = None, block: int = 0) -> jax.Array:
        """(chain, draw, n, L) latent draws at the training inputs ``X[start:stop]``: the
        stored ``latent``, or for an ``"inducing"`` fit one draw of p(f | v) per stored v
        from ``fold_in(key, block + i)`` (``ppgpc.infer.predictive.training_latent``)."""
        return predictive.training_latent(self, key, start, stop, block)

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
            info=dataclasses.replace(self.info, thinned_by=int(step) * self.info.thinned_by),
        )
