"""Scores and reliability of the class probabilities in an ArviZ ``InferenceData`` export,
or in arrays (docs/math.md section 7).

The metrics themselves live in ``ppgpc.evaluation.metrics`` (accuracy, NLL, Brier, ECE and its
reliability table), the tests and checks in ``ppgpc.evaluation.calibration`` and the drawing in
``ppgpc.evaluation.plotting``; this module gets (n, C) probabilities and (n,) labels out of an
``InferenceData`` (a ppgpc export: ``ppgpc.infer.to_inference_data`` or an estimator's
``to_inference_data``) and hands them to those, and puts several models in one table. All
but ``confidence_check`` (which needs an export's replicated labels) also take an (n, C)
probability array with (n,) labels 0..C-1 in place of the export:

* ``predictive_probabilities`` / ``true_labels`` / ``labels_to_indices``: p(y* = c) averaged
  over the draws of the ``predictions`` group (or, for the training inputs, of the posterior
  ``f`` through the model's link), the labels to score them against, and labels given by
  class name turned into indices;
* ``scores`` and ``calibration_table``: accuracy, NLL, Brier, the ECE of the kind the
  table names and the class-wise ECE (``classwise_ece``, also per class). The papers
  disagree on the ECE: Milios et al. (and the ILR paper) bin the top-label confidence
  max_c p(c | x) (``"top-label"``, binary p(y = 1) for C = 2); Galy-Fajou et al. report the
  class-wise ECE, the mean over classes of the one-vs-rest ECE (``"classwise"``). Both are
  always computed and every table says which column is which;
* ``plot_reliability`` / ``plot_classwise_reliability``: ``ppgpc.evaluation.plotting``'s
  diagrams (bin counts, consistency bands or the ECE, identity line, ArviZ look) fed from an
  ``InferenceData``;
* ``calibration_test``: ``ppgpc.evaluation.calibration``'s SKCE test of calibration (a
  p-value);
* ``confidence_check``: ``ppgpc.evaluation.calibration.confidence_ppc`` (the posterior
  predictive check of the predicted labels' accuracy by confidence bin) from an export's
  replicated labels.

Example:
    >>> import numpy as np
    >>> from ppgpc.evaluation.exports import scores
    >>> scores(np.array([[0.8, 0.1, 0.1], [0.2, 0.5, 0.3]]), np.array([0, 2]))["accuracy"]
    0.5
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ppgpc.evaluation import calibration, metrics
from ppgpc.evaluation.arviz_objects import group_names, is_container
from ppgpc.models import get_spec

__all__ = [
    "predictive_probabilities",
    "true_labels",
    "labels_to_indices",
    "scores",
    "classwise_ece",
    "CalibrationTable",
    "calibration_table",
    "calibration_test",
    "plot_reliability",
    "plot_classwise_reliability",
    "confidence_check",
]


# ------------------------------------------------------------ InferenceData -> arrays
def predictive_probabilities(idata, group: str = "predictions") -> np.ndarray:
    """(n, C) class probabilities averaged over the posterior: for ``"predictions"``, the
    estimator's ``predict_proba`` at those points, which the export holds as
    ``predictions_constant_data["p_mean"]`` (for an export without it, the mean of
    ``predictions["p"]`` over its chains and draws, within Monte Carlo error of it:
    ``ppgpc.infer.arviz_export``); for ``"posterior"``, the mean over the draws of ``f``.

    Args:
        idata: an ``InferenceData`` from ``ppgpc`` (``ppgpc.infer.to_inference_data``).
        group: ``"predictions"`` (the points asked for at export) or ``"posterior"`` (the
            training inputs: the model's link, named in the attrs, applied to each draw of
            ``f``).
    """
    if group == "predictions":
        if "predictions" not in group_names(idata):
            raise ValueError("this InferenceData has no predictions group: export it with "
                             "X_pred (to_inference_data(X_pred)) or use group='posterior'")
        if ("predictions_constant_data" in group_names(idata)
                and "p_mean" in idata.predictions_constant_data):
            p_mean = idata.predictions_constant_data["p_mean"]
            return np.asarray(p_mean.transpose("pred", "class").values)
        p = idata.predictions["p"]
        return np.asarray(p.mean(dim=("chain", "draw")).transpose("pred", "class").values)
    if group == "posterior":
        name = idata.posterior.attrs.get("ppgpc_model")
        if name is None:
            raise ValueError("the posterior's attrs do not name a ppgpc model (ppgpc_model); "
                             "pass probabilities as arrays instead")
        f = np.asarray(idata.posterior["f"].transpose("chain", "draw", "obs", "latent").values)
        return np.asarray(np.exp(get_spec(name).log_link(f)).mean(axis=(0, 1)))
    raise ValueError(f"group must be 'predictions' or 'posterior', got {group!r}")


def true_labels(idata, group: str = "predictions") -> np.ndarray:
    """(n,) the labels (indices 0..C-1) that ``predictive_probabilities(idata, group)``
    predicts: ``predictions_constant_data["y"]`` or ``observed_data["y"]``."""
    if group == "predictions":
        if ("predictions_constant_data" not in group_names(idata)
                or "y" not in idata.predictions_constant_data):
            raise ValueError("the InferenceData holds no true labels for its predictions: "
                             "pass y, or export with to_inference_data(X_pred, y_pred=...)")
        return np.asarray(idata.predictions_constant_data["y"].values)
    if group == "posterior":
        return np.asarray(idata.observed_data["y"].values)
    raise ValueError(f"group must be 'predictions' or 'posterior', got {group!r}")


def _class_coordinate(idata) -> list[str] | None:
    """The class names of an InferenceData (as strings), if any group has them: its
    ``class_label`` coordinate (ppgpc's export: an estimator's original labels,
    ``classes_``, or the codes 0..C-1 of a driver export), else its ``class``
    coordinate."""
    for name in ("class_label", "class"):
        for group in group_names(idata):
            if name in idata[group].coords:
                return [str(c) for c in idata[group].coords[name].values]
    return None


def labels_to_indices(idata, y) -> np.ndarray:
    """(n,) indices 0..C-1 of labels ``y`` given by the names of ``idata``'s ``class_label``
    coordinate (compared as strings): an estimator's export holds the original labels
    there (wine's 1, 2, 3 become 0, 1, 2), a driver export the indices themselves.

    Raises:
        ValueError: a label that is not a class name (e.g. an index given for an export
            whose classes have names).
    """
    names = _class_coordinate(idata)
    y = np.asarray(y)
    if names is None:
        return y
    index = {name: i for i, name in enumerate(names)}
    keys = [str(v) for v in y.tolist()]
    unknown = sorted({k for k in keys if k not in index})
    if unknown:
        raise ValueError(
            f"y holds label(s) {unknown[:10]} that are not among this InferenceData's classes "
            f"{names}; give y as those class names (the original labels for an estimator's "
            "export, indices 0..C-1 for a driver export)")
    return np.array([index[k] for k in keys], dtype=np.int64)


def _probs_and_labels(source, y=None, group: str = "predictions"):
    """(probs (n, C), labels (n,) as indices 0..C-1) from an InferenceData (``y`` then
    names classes as its ``class_label`` coordinate does: ``labels_to_indices``) or from a
    probability array (``y`` then holds indices)."""
    if is_container(source):
        probs = predictive_probabilities(source, group)
        labels = true_labels(source, group) if y is None else labels_to_indices(source, y)
    else:
        if y is None:
            raise ValueError("with probabilities given as an array, pass the labels y too")
        probs, labels = np.asarray(source, dtype=np.float64), np.asarray(y)
    return probs, labels


# ------------------------------------------------------------------ metrics
def scores(source, y=None, *, n_bins: int = 10, group: str = "predictions") -> dict:
    """Accuracy, NLL, Brier, ECE (with ``ece_kind`` naming it) and class-wise ECE.

    Args:
        source: an ``InferenceData`` or an (n, C) probability array.
        y: (n,) labels: indices 0..C-1 with an array ``source``; with an
            ``InferenceData``, the names of its ``class_label`` coordinate (the original labels
            for an estimator's export; ``labels_to_indices``), and optional when it holds
            the labels.
        n_bins: equal-width ECE bins.
        group: where an ``InferenceData``'s probabilities come from (``predictive_probabilities``).

    Returns:
        ``ppgpc.evaluation.metrics.evaluate``'s dict: accuracy, nll, brier, ece, ece_kind,
        classwise_ece.
    """
    probs, labels = _probs_and_labels(source, y, group)
    return metrics.evaluate(probs, labels, n_bins=n_bins)


def classwise_ece(source, y=None, *, n_bins: int = 10, group: str = "predictions",
                  per_class: bool = False):
    """The class-wise ECE (mean over classes of the one-vs-rest ECE), or with
    ``per_class=True`` the (C,) one-vs-rest ECEs it averages."""
    probs, labels = _probs_and_labels(source, y, group)
    if not per_class:
        return metrics.ece(probs, labels, n_bins, "classwise")
    return np.array([metrics.table_ece(metrics.reliability_table(
        probs, labels, n_bins, "classwise", class_index=c)) for c in range(probs.shape[1])])


@dataclasses.dataclass(frozen=True)
class CalibrationTable:
    """Metrics of several models on one test set, with the ECE kinds named.

    Attributes:
        rows: ``{model name: metrics dict}`` (``scores``' keys).
        n_bins: ECE bins.
    """

    rows: dict
    n_bins: int

    @property
    def ece_kind(self) -> str:
        """The kind of the ``ece`` column: "top-label" (C > 2) or "binary" (C = 2)."""
        kinds = {r["ece_kind"] for r in self.rows.values()}
        return kinds.pop() if len(kinds) == 1 else "mixed: " + ", ".join(sorted(kinds))

    def to_dataframe(self):
        """A pandas DataFrame, one row per model; column names carry the ECE kinds."""
        import pandas as pd

        return pd.DataFrame({
            name: {"accuracy": r["accuracy"], "NLL": r["nll"], "Brier": r["brier"],
                   f"ECE ({r['ece_kind']})": r["ece"], "ECE (class-wise)": r["classwise_ece"]}
            for name, r in self.rows.items()}).T

    def __repr__(self) -> str:
        head = (f"{'model':16s} {'accuracy':>9s} {'NLL':>8s} {'Brier':>8s} "
                f"{'ECE':>8s} {'cw-ECE':>8s}")
        lines = [f"ECE: {self.ece_kind} confidence, {self.n_bins} equal-width bins; "
                 "cw-ECE: class-wise (mean one-vs-rest ECE)", head, "-" * len(head)]
        for name, r in self.rows.items():
            lines.append(f"{str(name):16s} {r['accuracy']:9.3f} {r['nll']:8.3f} "
                         f"{r['brier']:8.3f} {r['ece']:8.3f} {r['classwise_ece']:8.3f}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        caption = (f"ECE: {self.ece_kind}, {self.n_bins} equal-width bins; class-wise ECE: "
                   "mean over classes of the one-vs-rest ECE")
        return f"<p>{caption}</p>" + self.to_dataframe().to_html(float_format="%.3f")


def calibration_table(sources: dict, y=None, *, n_bins: int = 10,
                      group: str = "predictions") -> CalibrationTable:
    """``scores`` for several models: ``{name: InferenceData or (n, C) probs}``, with the
    labels ``y`` shared (read by each source as ``scores`` reads them) or held by each
    ``InferenceData``."""
    if not sources:
        raise ValueError("sources is empty: pass {model name: InferenceData or probs}")
    return CalibrationTable({name: scores(src, y, n_bins=n_bins, group=group)
                             for name, src in sources.items()}, int(n_bins))


# ------------------------------------------------------------------ reliability
def _class_names(source, C: int):
    names = _class_coordinate(source) if is_container(source) else None
    return names if names is not None and len(names) == C else list(range(C))


BINNINGS = ("equal-mass", "equal-width")
"""``plot_reliability``'s bins: equal-mass with consistency bands (the default), or
equal-width with the ECE."""


def plot_reliability(source, y=None, *, group: str = "predictions",
                     bins: str = "equal-mass", **kwargs):
    """A reliability diagram from an ``InferenceData`` or arrays, drawn into ``ax`` or
    pyplot's current axes; returns the Axes.

    ``bins="equal-mass"`` (default): ``ppgpc.evaluation.plotting.reliability_bands_diagram``,
    bins of equal counts with each bin's count and its consistency band (the range its
    observed frequency takes under calibration), which a small test set needs;
    ``"equal-width"``: ``ppgpc.evaluation.plotting.reliability_diagram``, the ECE's bins
    with the ECE in the legend. ``kwargs`` go to the function drawn."""
    from ppgpc.evaluation.plotting import reliability_bands_diagram
    from ppgpc.evaluation.plotting import reliability_diagram as equal_width

    if bins not in BINNINGS:
        raise ValueError(f"bins must be one of {list(BINNINGS)}, got {bins!r}")
    probs, labels = _probs_and_labels(source, y, group)
    draw = reliability_bands_diagram if bins == "equal-mass" else equal_width
    return draw(probs, labels, **kwargs)


def plot_classwise_reliability(source, y=None, *, group: str = "predictions", **kwargs):
    """One one-vs-rest reliability diagram per class
    (``ppgpc.evaluation.plotting.classwise_reliability_grid``); returns the Figure."""
    from ppgpc.evaluation.plotting import classwise_reliability_grid

    probs, labels = _probs_and_labels(source, y, group)
    kwargs.setdefault("class_names", _class_names(source, probs.shape[1]))
    return classwise_reliability_grid(probs, labels, **kwargs)


def calibration_test(source, y=None, *, group: str = "predictions", **kwargs):
    """``ppgpc.evaluation.calibration.skce_test`` (the SKCE and its p-value under
    "calibrated") from an ``InferenceData`` or arrays; ``kwargs`` go to it (estimator, method,
    n_resamples, bandwidth, seed)."""
    probs, labels = _probs_and_labels(source, y, group)
    return calibration.skce_test(probs, labels, **kwargs)


def confidence_check(idata, *, group: str = "posterior",
                     **kwargs) -> calibration.ConfidencePPC:
    """``ppgpc.evaluation.calibration.confidence_ppc`` from a ppgpc ``InferenceData``.

    ``group="posterior"``: the training points, with ``predictive_probabilities(idata,
    "posterior")``, the observed labels and the replicated labels of
    ``posterior_predictive["y"]``; ``group="predictions"``: the exported prediction points,
    with their probabilities, their true labels (``to_inference_data(X_pred, y_pred=...)``)
    and the labels sampled in ``predictions["y"]``. ``kwargs`` go to
    ``ppgpc.evaluation.calibration.confidence_ppc`` (n_bins, min_count, level).

    Returns:
        A ``ppgpc.evaluation.calibration.ConfidencePPC``.
    """
    if not is_container(idata):
        raise ValueError("confidence_check needs a ppgpc InferenceData (to_inference_data); "
                         "for arrays use ppgpc.evaluation.calibration.confidence_ppc")
    probs = predictive_probabilities(idata, group)
    labels = true_labels(idata, group)
    if group == "posterior":
        if "posterior_predictive" not in group_names(idata):
            raise ValueError("this InferenceData has no posterior_predictive group")
        rep = idata.posterior_predictive["y"].transpose("chain", "draw", "obs")
    else:
        rep = idata.predictions["y"].transpose("chain", "draw", "pred")
    return calibration.confidence_ppc(probs, labels, np.asarray(rep.values), **kwargs)
