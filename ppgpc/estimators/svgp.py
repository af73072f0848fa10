"""``SoftmaxSVGPClassifier``: the sparse variational GP classifier (SVGPC, and
Uncollapsed-ILR with ``link="ilr"``), fitted by minibatch SVI."""

from __future__ import annotations

from ppgpc.estimators.base import DriverCall, GPClassifierBase, shared_doc
from ppgpc.estimators.options import SVGPInference, check_minibatch_options
from ppgpc.gp.inducing import resolve_num_inducing
from ppgpc.models.svgp import LINKS
from ppgpc.validation import MAX_EXACT_POINTS, check_count, check_flag

__all__ = ["SoftmaxSVGPClassifier"]


@shared_doc(example='num_inducing=20, inference_options={"batch_size": 64}')
class SoftmaxSVGPClassifier(GPClassifierBase):
    """The sparse variational GP classifier of Hensman et al. (2015) (``docs/math.md``,
    section 4): L latent GPs with M whitened inducing values each, a full-covariance
    Gaussian q(v_c), a learned L x L mixing matrix W before the link, and kernel
    hyperparameters and inducing inputs learned on the ELBO by minibatch SVI (Adam with a
    warm-up and cosine learning-rate schedule; ``ppgpc.infer.svi``).

    Args:
        num_inducing: inducing inputs M <= N (k-means++ start); None:
            ``ppgpc.gp.inducing.DEFAULT_NUM_INDUCING``, at most N.
        link: ``"softmax"`` (default, SVGPC, L = C) or ``"ilr"`` (Uncollapsed-ILR,
            L = C - 1, softmax(V W f)).
        likelihood_samples: draws per point of the expected log-likelihood estimate
            (default 10).
        shared_kernel: one set of kernel hyperparameters for all latents (default) or one
            per latent.
        shared_inducing: one set of M inducing inputs for all latents (default) or M per
            latent (with ``shared_kernel=False``: GPyTorch's batch-shaped multitask SVGP).
        kernel_prior: False (default): the kernel hyperparameters maximise the ELBO (type-II
            ML); True: the ELBO plus the kernel's log prior (type-II MAP), which keeps ARD
            lengthscales from running away.
        inference: ``"svi"`` (default) or ``"nuts"``: NUTS on the full, non-sparse GP with
            the same link (W = I) for small N, with kernel hyperparameters from an SVI fit
            with this estimator's SVI defaults (``inference_options`` are NUTS's then),
            unless given in ``inference_options["hyperparameters"]`` (for example another
            fit's ``result_.hypers``), or sampled, with ``{"sample_hyperparameters": True}``.
{SHARED_DOC}
            The minibatch keys of ``"svi"``: ``batch_size`` (default N, every point in
            every step, up to 640 points; 256 above), ``max_iter`` and ``learning_rate``
            (default 2000 steps at 0.1 when a step sees every point, 5000 at 0.01 with
            minibatches: the model's schedule, ``ppgpc.models.svgp.variational.
            svi_defaults``),
            ``validation_fraction`` (a stratified share held out; SVI keeps the iterate with the
            lowest held-out NLL, its trace in ``result_.info.validation.nll``); and any other
            SVI option, e.g. ``natural_gradient`` (a step size in (0, 1] for natural-gradient
            steps on q(v)).

    Attributes (after fit): those of ``GPClassifierBase`` (classes_, n_features_in_,
    n_iter_, result_: ``result_.info.svi`` has the ELBO, steps and seconds per epoch,
    ``result_.sample_stats["elbo"]`` the ELBO trace).

{EXAMPLE}
    """

    inference_choices = SVGPInference

    def __init__(self, *, num_inducing: int | None = None, link: str = "softmax",
                 likelihood_samples: int = 10, shared_kernel: bool = True,
                 shared_inducing: bool = True, kernel_prior: bool = False,
                 kernel="rbf-ard", inference: str = "svi", standardize: bool | str = True,
                 seed: int = 0, max_exact_points: int | None = MAX_EXACT_POINTS,
                 progress: bool = True, inference_options: dict | None = None):
        self._store_params(locals())

    @property
    def model_name(self) -> str:
        return "softmax_svgp" if self.link == "softmax" else "ilr_gp_uncollapsed"

    def _exact_size_limit(self) -> int | None:
        return (self.max_exact_points if self._inference() is SVGPInference.NUTS
                else None)

    def _check_model_settings(self) -> None:
        if self.link not in LINKS:
            raise ValueError(f"unknown link {self.link!r}; choose from {list(LINKS)}")
        for name in ("shared_kernel", "shared_inducing", "kernel_prior"):
            check_flag(name, getattr(self, name))
        if self.num_inducing is not None:
            check_count("num_inducing", self.num_inducing)
        check_count("likelihood_samples", self.likelihood_samples)

    def _method_options(self, given: dict) -> dict:
        if self._inference() is SVGPInference.SVI:
            return check_minibatch_options(given)
        if "validation_fraction" in given:
            raise ValueError("validation_fraction applies to inference='svi', not 'nuts'")
        return given

    def _svi_model_options(self, num_samples: int, natural_gradient) -> dict:
        """The model's ``prepare`` options of an SVI fit on ``num_samples`` points."""
        return {"num_inducing": resolve_num_inducing(self.num_inducing, num_samples),
                "seed": self.seed,
                # natural gradients need the never-positive curvature of Price's estimator
                "ell_estimator": "marginal" if natural_gradient is None else "price",
                "likelihood_samples": self.likelihood_samples,
                "shared_kernel": self.shared_kernel, "shared_inducing": self.shared_inducing,
                "kernel_prior": self.kernel_prior}

    def _driver_call(self, method: str, num_points: int, given: dict, exact: bool) -> DriverCall:
        """SVI: the model's options at N (``_svi_model_options``), no exact size limit; NUTS:
        the full GP's latent form, its hyperparameters the model's SVI fit at its own
        schedule, which the driver runs (``ppgpc.infer.svi.svi_hypers``)."""
        call = super()._driver_call(method, num_points, given, exact)
        if method == "svi":
            check_minibatch_options(given, num_points)
            return call._replace(model_options=self._svi_model_options(
                num_points, given.get("natural_gradient")), max_exact_points=None)
        if not self.shared_kernel:
            raise ValueError("inference='nuts' runs the full GP with one kernel for all "
                             "latents; use shared_kernel=True with it")
        return call._replace(model_options=self._svi_model_options(num_points, None),
                             options={"form": "latent"})
