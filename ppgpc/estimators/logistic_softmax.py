"""``LogisticSoftmaxGPClassifier``: the logistic-softmax GP through its Polya-Gamma
augmentation (Gibbs, CAVI) or NUTS."""

from __future__ import annotations

from ppgpc.estimators.base import DriverCall, GPClassifierBase, shared_doc
from ppgpc.estimators.options import LogisticSoftmaxInference, check_minibatch_options
from ppgpc.gp.inducing import resolve_num_inducing
from ppgpc.validation import MAX_EXACT_POINTS, check_count

__all__ = ["LogisticSoftmaxGPClassifier"]

STOCHASTIC_MAX_ITER = 1000
"""Iterations of the stochastic CAVI when ``inference_options`` gives no ``max_iter`` (its
steps are cheap and noisy; the full CAVI's default is 300 and stops at convergence)."""


@shared_doc(example='inference="cavi"')
class LogisticSoftmaxGPClassifier(GPClassifierBase):
    """The logistic-softmax GP classifier (``docs/math.md``, section 3): p(y = k | f) =
    sigma(f_k) / sum_c sigma(f_c) with one latent GP per class, inferred through its
    Polya-Gamma augmentation. Every inference predicts by averaging the likelihood over
    posterior (or variational) draws of f.

    Args:
        num_inducing: inducing inputs M of ``inference="cavi"`` or ``"gibbs"``: None
            (default) is the full model (Z = X); an integer M < N the sparse CAVI,
            predicting through q's own p(f* | u) at O(N M^2) cost with no size limit, or
            the inducing-point Gibbs sampler, exact for the DTC model f = K_nm K_mm^-1 u at
            the training inputs (O(N M^2 C) per sweep, no size limit), its kernel
            hyperparameters and inducing inputs fixed at the type-II MAP point of the
            stochastic sparse CAVI (minibatches of 128 points, 1000 iterations) unless
            given in ``inference_options["hyperparameters"]`` (optionally with
            ``inducing_inputs``).
            With a ``batch_size`` in ``inference_options`` (the stochastic CAVI), None
            means ``ppgpc.gp.inducing.DEFAULT_NUM_INDUCING``, at most N.
        inference: ``"nuts"`` (default): NUTS on the non-augmented latent model (4
            chains of 500 warm-up, then draws until R-hat and ESS pass, the driver's
            defaults: ``ppgpc.infer.mcmc``), kernel
            hyperparameters fitted first by type-II MAP on the CAVI ELBO, given in
            ``inference_options["hyperparameters"]``, or sampled with
            ``{"sample_hyperparameters": True}``. ``"gibbs"``: the exact blocked Gibbs
            sampler of the Polya-Gamma augmented model, hyperparameters as for NUTS or
            sampled in every sweep with ``{"sample_hyperparameters": True}``; it mixes more
            slowly than NUTS (docs/records/gibbs.md), so its chains run longer before they
            pass the convergence check (up to ``max_samples``, default 2000 per chain).
            ``"cavi"``: mean-field coordinate-ascent VI with hyperparameter learning; full,
            sparse (``num_inducing``) or stochastic (minibatches: ``inference_options``
            with ``batch_size``, and ``max_iter``, ``learning_rate``,
            ``validation_fraction``, ``class_batch_size``).
{SHARED_DOC}

    Attributes (after fit): those of ``GPClassifierBase`` (classes_, n_features_in_,
    n_iter_, result_ ...). With ``validation_fraction``, ``result_.info.validation`` has the
    held-out NLL of the fit (``nll``, ``best_nll``, ``size``).

{EXAMPLE}
    """

    model_name = "logistic_softmax"
    inference_choices = LogisticSoftmaxInference
    removed_inference = {"svi": "the stochastic CAVI is inference='cavi' with a batch_size "
                                "in inference_options"}

    def __init__(self, *, num_inducing: int | None = None, kernel="rbf-ard",
                 inference: str = "nuts", standardize: bool | str = True, seed: int = 0,
                 max_exact_points: int | None = MAX_EXACT_POINTS, progress: bool = True,
                 inference_options: dict | None = None):
        self._store_params(locals())

    def _stochastic(self) -> bool:
        """Whether the CAVI runs on minibatches (a batch size of points or classes)."""
        given = self._given_options()
        return self._inference() is LogisticSoftmaxInference.CAVI and (
            given.get("batch_size") is not None or given.get("class_batch_size") is not None)

    def _check_model_settings(self) -> None:
        given = self._given_options()
        if "num_inducing" in given:
            raise ValueError("give num_inducing to the constructor "
                             "(LogisticSoftmaxGPClassifier(num_inducing=M)), not in "
                             "inference_options")
        if self.num_inducing is not None:
            check_count("num_inducing", self.num_inducing)
            if self._inference() is LogisticSoftmaxInference.NUTS:
                raise ValueError("num_inducing applies to inference='cavi' or 'gibbs', not "
                                 "'nuts'")

    def _method_options(self, given: dict) -> dict:
        inference = self._inference()
        if inference is LogisticSoftmaxInference.CAVI:
            given = check_minibatch_options(given)
        elif "validation_fraction" in given:
            raise ValueError("validation_fraction applies to inference='cavi', not "
                             f"{str(inference)!r}")
        if inference is LogisticSoftmaxInference.GIBBS and self.num_inducing is not None:
            given = {**given, "num_inducing": int(self.num_inducing)}
        return given

    def _exact_size_limit(self) -> int | None:
        """None for the sparse and stochastic CAVI (no N x N matrix; the driver checks
        that M < N itself)."""
        if self.num_inducing is not None or self._stochastic():
            return None
        return self.max_exact_points

    def _driver_call(self, method: str, num_points: int, given: dict, exact: bool) -> DriverCall:
        """CAVI: the sparse version's M (resolved at N for the stochastic one, which also
        runs ``STOCHASTIC_MAX_ITER`` iterations unless told); the inducing-point Gibbs
        sampler: M; NUTS: the latent form, its hyperparameters the model's CAVI fit, which
        the driver runs (``Latent.fit_hypers``)."""
        call = super()._driver_call(method, num_points, given, exact)
        if method == "cavi":
            check_minibatch_options(given, num_points)
            if self._stochastic():
                return call._replace(
                    options={"max_iter": STOCHASTIC_MAX_ITER},
                    fixed={"num_inducing": resolve_num_inducing(self.num_inducing,
                                                                num_points)})
            if self.num_inducing is not None:
                return call._replace(fixed={"num_inducing": int(self.num_inducing)})
        if method == "gibbs" and self.num_inducing is not None:
            return call._replace(fixed={"num_inducing": int(self.num_inducing)})
        if method == "nuts":
            return call._replace(options={"form": "latent"})
        return call
