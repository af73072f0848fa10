"""``ILRGPClassifier``: conjugate GP regression on label-smoothed ILR targets."""

from __future__ import annotations

import numpy as np

from ppgpc.estimators.base import Selected, shared_doc
from ppgpc.estimators.conjugate import GRID_EXTENSIONS, ConjugateClassifier, SearchFit
from ppgpc.gp.simplex import target_separation
from ppgpc.infer import convergence
from ppgpc.models.ilr_gp import DEFAULT_EPSILON, DEFAULT_TAU, EPSILON_GRID, TAU_GRID, prepare
from ppgpc.runtime.progress import Timer, note, time_left
from ppgpc.validation import MAX_EXACT_POINTS, check_flag, check_positive, check_probability

__all__ = ["ILRGPClassifier"]


@shared_doc(example="epsilon=0.999")
class ILRGPClassifier(ConjugateClassifier):
    """The ILR-GP classifier (``docs/math.md``, section 1): GP regression on the
    isometric log-ratio (ILR) coordinates of label-smoothed one-hot targets, with the
    closed-form Gaussian posterior, and class probabilities by Monte Carlo through the
    inverse ILR (softmax) link.

    Args:
        epsilon: label-smoothing level in (0, 1), or ``"auto"`` (default) to choose it by
            held-out NLL (``selection``) and refit on all the data. It acts as an inverse
            temperature of the fitted latent.
        tau: the tolerance that sets the noise sigma relative to the targets, or
            ``"auto"`` (default) to choose it jointly with epsilon by leave-one-out NLL;
            where no leave-one-out search runs (``selection.validation`` ``"cv"`` or
            ``"holdout"``, ``inference="collapsed"``), ``"auto"`` and None mean
            ``ppgpc.models.ilr_gp.DEFAULT_TAU``.
        noise_std: set sigma directly instead (overrides tau).
        learn_noise_scale: fit a factor s on the noise variance, s sigma^2, with the kernel
            hyperparameters (LogNormal(0, 1) prior under MAP and NUTS); one per ILR
            coordinate with ``inference="collapsed", shared_inducing=False``. Exact type-II
            ML tends to drive s to 0 on labels without noise (``fit`` warns).
        num_inducing: inducing inputs M of ``inference="collapsed"`` (k-means++ start,
            learned with the hyperparameters); None: ``ppgpc.gp.inducing.DEFAULT_NUM_INDUCING``,
            at most N.
        shared_inducing: one set of M inducing inputs for all C-1 ILR coordinates
            (default), or M per coordinate (``inference="collapsed"`` only; C-1 times the
            cost per step).
        selection: how ``epsilon="auto"`` is chosen: a ``ppgpc.Selection`` (grid,
            validation scheme), None for its defaults (closed-form leave-one-out over
            ``ppgpc.models.ilr_gp.EPSILON_GRID``).
        inference: ``"map"`` (default: type-II MAP kernel hyperparameters, the kernel
            priors of ``ppgpc.gp.kernels`` included, then the closed-form posterior),
            ``"exact"`` (type-II ML), ``"nuts"`` (NUTS over the hyperparameters; options
            such as ``{"num_samples": 1000}`` in ``inference_options``) or
            ``"collapsed"`` (Collapsed-ILR: Titsias's sparse bound, no size limit). The
            uncollapsed sparse variational ILR classifier is
            ``SoftmaxSVGPClassifier(link="ilr")``.
{SHARED_DOC}

    Attributes (after fit):
        those of ``GPClassifierBase`` (classes_, n_features_in_, n_iter_, result_ ...);
        epsilon_, epsilon_scores_ (held-out NLL per epsilon when searched, at the chosen
        tau), tau_ (None with ``noise_std``), tau_scores_ (leave-one-out NLL per tau at the
        chosen epsilon when searched; on a stratified subsample of
        ``ppgpc.estimators.conjugate.SEARCH_ROWS`` rows, at its own best epsilon, when there
        are more), noise_std_ (sigma before any learned scale),
        noise_scale_ (the fitted s, None unless ``learn_noise_scale``).

{EXAMPLE}
    """

    model_name = "ilr_gp"
    has_noise_scale = True
    noun = "ILR coordinate"
    removed_inference = {"uncollapsed": "the uncollapsed sparse variational ILR classifier "
                                        "is SoftmaxSVGPClassifier(link='ilr')"}

    def __init__(self, *, epsilon="auto", tau="auto", noise_std: float | None = None,
                 learn_noise_scale: bool = False, num_inducing: int | None = None,
                 shared_inducing: bool = True, selection=None, kernel="rbf-ard",
                 inference: str = "map", standardize: bool | str = True, seed: int = 0,
                 max_exact_points: int | None = MAX_EXACT_POINTS, progress: bool = True,
                 inference_options: dict | None = None):
        self._store_params(locals())

    def _noise_scale_names(self) -> tuple[np.ndarray, str]:
        """Collapsed-ILR's per-entry noise scale is one per ILR coordinate, (C-1,)."""
        return np.arange(len(self.classes_) - 1), "ILR coordinate(s)"

    def _check_model_settings(self) -> None:
        super()._check_model_settings()
        if self.epsilon != "auto":
            check_probability("epsilon", self.epsilon, "or 'auto'")
        if self.tau not in ("auto", None):
            check_probability("tau", self.tau, "or 'auto'")
        if self.noise_std is not None:
            check_positive("noise_std", self.noise_std)
        check_flag("learn_noise_scale", self.learn_noise_scale)

    def _fixed_tau(self) -> float:
        """The tolerance of a fit that does not search it: the given ``tau``, or
        ``DEFAULT_TAU`` for ``None`` and for ``"auto"`` where no leave-one-out search runs."""
        return DEFAULT_TAU if self.tau in (None, "auto") else float(self.tau)

    def _options_for(self, epsilon: float, tau: float | None = None) -> dict:
        """The model's ``prepare`` options at ``epsilon`` (and ``tau``)."""
        noise = {} if self.noise_std is None else {"noise_std": float(self.noise_std)}
        learn = {"learn_noise_scale": True} if self.learn_noise_scale else {}
        return {"epsilon": float(epsilon),
                "tau": self._fixed_tau() if tau is None else float(tau), **noise, **learn}

    def _search_range(self, name: str, num_classes: int) -> tuple[float, float]:
        """epsilon in (0, 1), at least 1e-12 from 1; tau in (0, min(1, (C - 1) / 2)), where
        Proposition 1 holds (a probability, and tau / (C - 1) < 1/2:
        ``ppgpc.gp.simplex.proposition1_noise_std``)."""
        if name == "epsilon":
            return 0.0, 1.0 - 1e-12
        return 0.0, min(1.0, (num_classes - 1) / 2.0)

    def _loo_joint_scores(self, X, y, num_classes, epsilons, taus, *,
                          extend_epsilon: bool = True, start_from: SearchFit | None = None,
                          report: tuple = ("epsilon", "tau")
                          ) -> tuple[dict, dict, tuple[str, ...]]:
        """({(epsilon, tau): leave-one-out NLL}, {tau: its ``SearchFit``}, the phrases of the
        grids named in ``report`` that ended at a falling edge), one fit per tau
        (``_JointSearch``); with a fixed ``noise_std``, one fit per epsilon (no tau).

        A grid whose best pair lies at its edge with the NLL still falling goes on past it
        (``ConjugateClassifier._extend_search``), epsilon's only with ``extend_epsilon``.
        ``start_from``: a fit of the same search on a subsample, where the first fit starts."""
        if self.noise_std is not None:
            _, scores, fit, edges = self._search_grid(X, y, num_classes, epsilons, "epsilon",
                                                      extend=extend_epsilon)
            return {(e, taus[0]): v for e, v in scores.items()}, {taus[0]: fit}, edges
        search = _JointSearch(self._levels(X, y, num_classes, "tau", start_from), num_classes,
                              epsilons, len(taus), self.progress)
        for tau in taus:
            search.add_tau(float(tau))
        extend_epsilon = extend_epsilon and len(search.epsilons) > 1  # a fixed one stays
        room = {"epsilon": GRID_EXTENSIONS if extend_epsilon else 0, "tau": GRID_EXTENSIONS}
        while True:
            by_epsilon, by_tau = search.profiles()
            value = room["epsilon"] and self._next_value("epsilon", by_epsilon, num_classes)
            if value:
                room["epsilon"] -= 1
                search.epsilons.append(value)
                search.add_epsilons([value], list(search.scorers), self._run_beyond(
                    "epsilon", search.epsilons, value, room["epsilon"], num_classes))
                continue
            value = room["tau"] and self._next_value("tau", by_tau, num_classes)
            if not value:
                break
            room["tau"] -= 1
            search.add_tau(value)
        edges = tuple(edge for name, profile in zip(("epsilon", "tau"), search.profiles())
                      if name in report
                      for edge in (convergence.grid_edge(name, profile),) if edge is not None)
        return {k: float(np.mean(v)) for k, v in search.losses.items()}, search.levels.fits, edges

    def _run_beyond(self, name: str, values: list, value: float, count: int,
                    num_classes: int) -> list:
        """Up to ``count`` values past ``value``, the newest edge of ``values``, each one
        ``_beyond`` the last: where an extension of the grid would go next."""
        edge = "low" if value == min(values) else "high"
        grid = list(values)
        for _ in range(count):
            nxt = self._beyond(name, grid, edge, num_classes)
            if nxt is None:
                break
            grid.append(nxt)
        return grid[len(values):]

    def _level_options(self, name: str, value: float) -> dict:
        """tau's fits are at the reference epsilon (others by rescaling, ``_JointSearch``)."""
        if name == "tau":
            return self._options_for(DEFAULT_EPSILON, value)
        return self._options_for(value)

    def _select_model_options(self, X, y, num_classes) -> Selected:
        selection = self._selection()
        fit, edges = None, ()
        search_tau = self.tau == "auto" and self.noise_std is None and self._uses_loo()
        epsilons = ((EPSILON_GRID if selection.grid is None else selection.grid)
                    if self.epsilon == "auto" else (float(self.epsilon),))
        self.epsilon_scores_ = self.tau_scores_ = None
        if self._uses_loo() and (self.epsilon == "auto" or search_tau):
            taus = TAU_GRID if search_tau else (self._fixed_tau(),)
            rows = self._search_rows(y, "tau") if search_tau or self._switched() else None
            extend_epsilon, start_from = selection.grid is None, None
            if rows is not None:  # tau on a subsample; epsilon on all rows at that tau
                sub_scores, sub_fits, edges = self._loo_joint_scores(
                    X[rows], y[rows], num_classes, epsilons, taus,
                    extend_epsilon=extend_epsilon, report=("tau",))
                e_sub, tau = min(sub_scores, key=sub_scores.get)
                self.tau_scores_ = {t: v for (e, t), v in sub_scores.items() if e == e_sub}
                taus, start_from = (tau,), sub_fits[tau]
            if rows is not None and self._switched():  # no exact fit on all rows
                scores, fits = sub_scores, sub_fits
            else:  # on all rows, or on the subsample that fits the hyperparameters
                fitted = self._hyper_rows(y)
                fitted = slice(None) if fitted is None else fitted
                scores, fits, more = self._loo_joint_scores(
                    X[fitted], y[fitted], num_classes, epsilons, taus,
                    extend_epsilon=extend_epsilon, start_from=start_from)
                edges += more
            epsilon, tau = min(scores, key=scores.get)
            fit = fits.get(tau)
            if self.epsilon == "auto":
                self.epsilon_scores_ = {e: v for (e, t), v in scores.items() if t == tau}
            if search_tau and rows is None:
                self.tau_scores_ = {t: v for (e, t), v in scores.items() if e == epsilon}
        elif self.epsilon == "auto":  # cross-validation or holdout, with refits
            epsilon, self.epsilon_scores_, _, edges = self._search_grid(
                X, y, num_classes, epsilons, "epsilon", extend=selection.grid is None)
            tau = self._fixed_tau()
        else:
            epsilon, tau = epsilons[0], self._fixed_tau()
        self.epsilon_ = float(epsilon)
        self.tau_ = None if self.noise_std is not None else float(tau)
        options = self._options_for(self.epsilon_, self.tau_)
        self.noise_std_ = float(np.sqrt(prepare(X[:1], y[:1], num_classes, **options).noise_var))
        return Selected(options, self._final_options(fit, X, y, num_classes, options), edges)


class _JointSearch:
    """The per-point leave-one-out losses of (epsilon, tau) pairs, one fit per tau.

    The ILR targets of level epsilon are a(epsilon) = log(1 + C epsilon / (1 - epsilon))
    times fixed unit targets and the noise scales with them, so a type-II ML fit at one
    level is the fit at any other with the latent scaled by a(epsilon) / a(reference)
    (``ppgpc.infer.loo``): each tau's fit (``levels.score(tau)``, at the reference epsilon)
    scores any epsilon by rescaling its leave-one-out predictive.
    """

    def __init__(self, levels, num_classes: int, epsilons, num_taus: int, progress: bool):
        self.levels, self.num_classes, self.progress = levels, num_classes, progress
        self.num_taus, self.reference = num_taus, target_separation(num_classes, DEFAULT_EPSILON)
        self.epsilons, self.scorers, self.losses = [float(e) for e in epsilons], {}, {}
        self.ahead = {}  # {(epsilon, tau): losses} scored before the search reached them
        self.timer = Timer()

    def add_epsilons(self, values, taus, lookahead=()) -> None:
        """Score ``values`` at each tau, and ``lookahead`` (the values an extension would
        add next) in the same call, kept until the search reaches them."""
        for tau in taus:
            todo = [e for e in (*values, *lookahead) if (e, tau) not in self.ahead]
            scales = [target_separation(self.num_classes, e) / self.reference for e in todo]
            self.ahead.update(zip(((e, tau) for e in todo),
                                  self.scorers[tau](scales) if todo else ()))
            self.losses.update({(e, tau): self.ahead[(e, tau)] for e in values})

    def add_tau(self, tau: float) -> None:
        """Fit at ``tau`` and score every epsilon there (a progress note per tau)."""
        timer = Timer()
        self.scorers[tau] = self.levels.score(tau)
        done = len(self.scorers)
        self.add_epsilons(self.epsilons, [tau])
        best = min(self.epsilons, key=lambda e: np.mean(self.losses[(e, tau)]))
        note(f"tau {tau:g} ({done}/{max(self.num_taus, done)}): leave-one-out NLL "
             f"{np.mean(self.losses[(best, tau)]):.4f} at epsilon {best:g} "
             f"({len(self.epsilons)} epsilon value(s), {timer}"
             f"{time_left(self.timer.seconds, done, self.num_taus)})", self.progress)

    def profiles(self) -> tuple[dict, dict]:
        """The per-point losses along epsilon at the best tau and along tau at the best
        epsilon."""
        e_best, t_best = min(self.losses, key=lambda k: np.mean(self.losses[k]))
        return ({e: self.losses[(e, t_best)] for e in self.epsilons},
                {t: self.losses[(e_best, t)] for t in self.scorers})
