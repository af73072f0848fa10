"""``DirichletGPClassifier``: the Dirichlet-based GP classifier (GPD)."""

from __future__ import annotations

from ppgpc.estimators.base import Selected, shared_doc
from ppgpc.estimators.conjugate import ConjugateClassifier
from ppgpc.models.dirichlet_gp import ALPHA_EPS_GRID
from ppgpc.validation import MAX_EXACT_POINTS, check_flag, check_positive

__all__ = ["DirichletGPClassifier"]

PREDICT_FROM = ("latent", "noisy")
"""The ``predict_from`` settings."""


@shared_doc(example="alpha_eps=0.01")
class DirichletGPClassifier(ConjugateClassifier):
    """The Dirichlet-based GP classifier, GPD (Milios et al. 2018; ``docs/math.md``,
    section 2): heteroscedastic GP regression on log-normal approximations of Dirichlet
    pseudo-counts, one latent GP per class whose constant prior mean is one learned level
    plus the class's log frequency (so far from the data the probabilities are the class
    frequencies pulled towards uniform); class probabilities are E[softmax(f*)] by Monte
    Carlo.

    Args:
        alpha_eps: pseudo-count of the classes a point does not belong to (> 0);
            ``"auto"`` (default) chooses it by held-out NLL (``selection``), ``"train"`` by
            training NLL as Milios et al. do; either way the model is then refitted on all
            the data.
        shared_kernel: one kernel for all classes (default, Milios et al.) or one per class.
        learn_noise_scale: fit a factor per class on the noise variances with the kernel
            hyperparameters (LogNormal(0, 1) prior under MAP and NUTS). Exact type-II ML can
            drive a class's factor to 0 (``fit`` warns and names the class).
        predict_from: ``"latent"`` (default) or ``"noisy"`` (sample the pseudo-observation,
            latent plus its noise).
        num_inducing: inducing inputs M of ``inference="collapsed"`` (k-means++ start,
            learned); None: ``ppgpc.gp.inducing.DEFAULT_NUM_INDUCING``, at most N.
        shared_inducing: one set of M inducing inputs for all classes (default), or M per
            class (``inference="collapsed"`` only; C times the cost per step).
        selection: how ``alpha_eps="auto"`` is chosen: a ``ppgpc.Selection`` (grid,
            validation scheme), None for its defaults (closed-form leave-one-out over
            ``ppgpc.models.dirichlet_gp.ALPHA_EPS_GRID``).
        inference: ``"map"`` (default: type-II MAP and the conjugate posterior, one
            Cholesky per class), ``"exact"`` (type-II ML), ``"nuts"`` or ``"collapsed"``
            (sparse GPD: Titsias's bound with per-class noise, no size limit).
{SHARED_DOC}

    Attributes (after fit):
        those of ``GPClassifierBase`` (classes_, n_features_in_, n_iter_, result_ ...);
        alpha_eps_, alpha_eps_scores_ (NLL per candidate when searched; by leave-one-out on
        a stratified subsample of ``ppgpc.estimators.conjugate.SEARCH_ROWS`` rows when
        there are more), noise_scale_
        ((C,) fitted class factors, None unless ``learn_noise_scale``).

{EXAMPLE}
    """

    model_name = "dirichlet_gp"
    has_noise_scale = True

    def __init__(self, *, alpha_eps="auto", shared_kernel: bool = True,
                 learn_noise_scale: bool = False, predict_from: str = "latent",
                 num_inducing: int | None = None, shared_inducing: bool = True,
                 selection=None, kernel="rbf-ard", inference: str = "map",
                 standardize: bool | str = True, seed: int = 0,
                 max_exact_points: int | None = MAX_EXACT_POINTS, progress: bool = True,
                 inference_options: dict | None = None):
        self._store_params(locals())

    def _check_model_settings(self) -> None:
        if self.alpha_eps not in ("auto", "train"):
            try:
                check_positive("alpha_eps", self.alpha_eps)
            except ValueError:
                raise ValueError("alpha_eps must be a finite positive number, 'auto' or "
                                 f"'train', got {self.alpha_eps!r}") from None
        check_flag("shared_kernel", self.shared_kernel)
        check_flag("learn_noise_scale", self.learn_noise_scale)
        super()._check_model_settings()

    def _options_for(self, alpha_eps: float) -> dict:
        return {"alpha_eps": float(alpha_eps), "shared_kernel": self.shared_kernel,
                "predict_from": self.predict_from,
                "learn_noise_scale": self.learn_noise_scale}

    def _select_model_options(self, X, y, num_classes) -> Selected:
        if self.alpha_eps not in ("auto", "train"):
            self.alpha_eps_ = self.alpha_eps
            self.alpha_eps_scores_ = None
            options = self._options_for(self.alpha_eps)
            return Selected(options, self._final_options(None, X, y, num_classes, options))
        grid = self._selection().grid
        rows = None
        if self.alpha_eps == "auto" and self._uses_loo():
            rows = self._search_rows(y, "alpha_eps")
        best, scores, fit, edges = self._search_grid(
            *((X, y) if rows is None else (X[rows], y[rows])), num_classes,
            ALPHA_EPS_GRID if grid is None else grid, "alpha_eps",
            on_training_data=self.alpha_eps == "train", extend=grid is None)
        self.alpha_eps_scores_ = scores
        self.alpha_eps_ = best
        options = self._options_for(self.alpha_eps_)
        return Selected(options, self._final_options(fit, X, y, num_classes, options), edges)
