"""Compare two posteriors variable by variable: "MCMC versus conjugate", "Gibbs versus NUTS".

``compare_posteriors(a, b)`` takes two ``InferenceData`` (or dicts of (chain, draw, ...)
arrays) and reports, for every shared posterior variable:

* per element: means, standard deviations, bulk effective sample sizes (ArviZ), the
  standardised mean difference ``smd = (mean_a - mean_b) / sqrt((sd_a^2 + sd_b^2) / 2)``
  (an effect size that does not grow with the number of draws), the Monte Carlo z-score
  ``z = (mean_a - mean_b) / sqrt(sd_a^2 / ess_a + sd_b^2 / ess_b)`` (ESS-based standard
  errors, so autocorrelated MCMC draws are not over-trusted), and ``sd_ratio = sd_a / sd_b``;
* per variable: those summarised (largest |smd| and |z|, range of the sd ratios) and a
  two-sample energy-distance test on the joint draws of the variable's elements, each
  element standardised by the pooled standard deviation:
  ``E = 2 E|A - B| - E|A - A'| - E|B - B'|`` (V-statistic), with a permutation p-value
  ``(1 + #{E_perm >= E}) / (1 + num_permutations)``.

Autocorrelation: a permutation test assumes independent draws. Each posterior is thinned
evenly within its chains to about its effective sample size (the smallest bulk ESS over
the variable's non-constant elements) and at most ``max_draws`` draws, so the test sees
nearly independent draws and stays fast (an O(n^2) distance matrix, n <= 2 max_draws,
and all permutations in one jitted, vmapped call). Independent draws (conjugate,
variational) have ESS close to their number and are only capped.

A variable is flagged ``different`` when its p-value is below ``alpha / number of
variables`` (Bonferroni over the variables compared). Point estimates (constant over the
draws; from an ``InferenceData``, the point hyperparameters its ``constant_data`` marks
with ``attrs["point_estimate"]``) compare as equal when equal, and as different (infinite
smd, smallest p-value) when not.

Example:
    >>> import numpy as np
    >>> from ppgpc.evaluation.posteriors import compare_posteriors
    >>> rng = np.random.default_rng(0)
    >>> a = {"theta": rng.normal(size=(2, 300))}; b = {"theta": rng.normal(size=(2, 300))}
    >>> bool(compare_posteriors(a, b).table.loc["theta", "different"])
    False
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from ppgpc.evaluation.arviz_objects import group, group_names, is_container
from ppgpc.evaluation.chain_diagnostics import ess_bulk
from ppgpc.runtime.programs import jit
from ppgpc.validation import check_count, check_probability, check_seed

__all__ = ["PosteriorComparison", "compare_posteriors", "energy_test"]


# ------------------------------------------------------------------ energy statistic
@jit
def _energy_statistics(dist, valid, masks):
    """Energy distances (V-statistics) between the two groups named by each row of
    ``masks`` (P, n) (1 for group a, 0 otherwise) among the ``valid`` (n,) points, given
    their distance matrix ``dist`` (n, n); returns (P,). Padding rows have valid = 0."""
    a = masks * valid[None, :]                       # (P, n)
    b = valid[None, :] - a
    na, nb = jnp.sum(a, axis=1), jnp.sum(b, axis=1)  # (P,)
    da, db = a @ dist, b @ dist                      # (P, n): two matrix products
    ab = jnp.sum(da * b, axis=1) / (na * nb)
    aa = jnp.sum(da * a, axis=1) / (na * na)
    bb = jnp.sum(db * b, axis=1) / (nb * nb)
    return 2.0 * ab - aa - bb


def energy_test(draws_a, draws_b, *, num_permutations: int = 200, seed: int = 0):
    """Energy distance between two samples and its permutation p-value.

    Args:
        draws_a: (n_a, k) draws; draws_b: (n_b, k) draws (rows assumed independent).
        num_permutations: random relabellings.
        seed: for the permutations.

    Returns:
        (energy distance, p-value).
    """
    a, b = (np.asarray(d, dtype=np.float64) for d in (draws_a, draws_b))
    a, b = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    pooled = np.concatenate([a, b])
    sd = pooled.std(axis=0)
    keep = sd > 0
    if not keep.any():
        return 0.0, 1.0
    points = (pooled[:, keep] - pooled[:, keep].mean(axis=0)) / sd[keep]
    n = points.shape[0]
    sq = np.sum(points * points, axis=1)
    dist = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * points @ points.T, 0.0))
    pad = 128 * (-(-n // 128)) - n  # pad to a multiple of 128: few compilations
    observed = (np.arange(n) < a.shape[0]).astype(np.float64)
    rng = np.random.default_rng(seed)
    perms = np.stack([observed] + [rng.permutation(observed) for _ in range(num_permutations)])
    stats = np.asarray(_energy_statistics(jnp.asarray(np.pad(dist, (0, pad))),
                                          jnp.asarray(np.pad(np.ones(n), (0, pad))),
                                          jnp.asarray(np.pad(perms, ((0, 0), (0, pad))))))
    exceed = np.sum(stats[1:] >= stats[0] - 1e-12 * abs(stats[0]))
    p_value = (1.0 + exceed) / (1.0 + num_permutations)
    return float(stats[0]), float(p_value)


# ------------------------------------------------------------------ inputs
def _point_estimates(idata, chains: int, draws: int) -> dict:
    """{name: (chain, draw, ...)}: the point hyperparameters that ppgpc's export keeps in
    ``constant_data`` (marked ``attrs["point_estimate"]``), constant over the draws."""
    if "constant_data" not in group_names(idata):
        return {}
    data = idata.constant_data
    return {str(name): np.broadcast_to(np.asarray(data[name].values),
                                       (chains, draws) + data[name].shape)
            for name in data.data_vars if "point_estimate" in data[name].attrs}


def _posterior(source) -> dict:
    """{name: (chain, draw, ...) numpy array} from an InferenceData (its posterior, and its
    point estimates as constant draws), Dataset or dict."""
    points = {}
    if is_container(source):
        idata, source = source, group(source, "posterior")
        points = _point_estimates(idata, source.sizes["chain"], source.sizes["draw"])
    if hasattr(source, "data_vars"):
        return {**points, **{str(name): np.asarray(source[name].transpose(
            "chain", "draw", ...).values) for name in source.data_vars}}
    if isinstance(source, dict):
        out = {str(k): np.asarray(v, dtype=np.float64) for k, v in source.items()}
        for k, v in out.items():
            if v.ndim < 2:
                raise ValueError(f"variable {k!r} must be shaped (chain, draw, ...); got {v.shape}")
        return out
    raise TypeError(f"expected an InferenceData, an xarray Dataset or a dict of arrays; got "
                    f"{type(source).__name__}")


def _ess(draws: np.ndarray) -> np.ndarray:
    """Bulk ESS of every element of (chain, draw, k) draws (``chain_diagnostics.ess_bulk``:
    ArviZ's ``ess(method="bulk")``, vectorised over elements). Constant elements (whose mean
    is exact) and undefined values get the number of draws; the result is capped at the
    number of draws (the conservative choice for anti-correlated draws).
    """
    chains, n, k = draws.shape
    total = float(chains * n)
    out = np.full(k, total)
    varying = np.ptp(draws.reshape(-1, k), axis=0) > 0
    if n >= 8 and varying.any():
        ess = np.asarray(ess_bulk(draws[:, :, varying]), dtype=np.float64)
        out[varying] = np.where(np.isfinite(ess) & (ess > 0), np.minimum(ess, total), total)
    return out


def _thin(draws: np.ndarray, target: int) -> np.ndarray:
    """(m, k) draws thinned evenly within chains to about ``target`` in total."""
    chains, n, k = draws.shape
    step = max(1, int(math.ceil(chains * n / max(target, 2))))
    thinned = draws[:, ::step].reshape(-1, k)
    if thinned.shape[0] > target:
        thinned = thinned[np.linspace(0, thinned.shape[0] - 1, target).astype(int)]
    return thinned


def _ratio(num, den):
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den
    both_zero = (num == 0) & (den == 0)
    return np.where(both_zero, 0.0, out)


# ------------------------------------------------------------------ result
@dataclasses.dataclass(frozen=True)
class PosteriorComparison:
    """Outcome of ``compare_posteriors``.

    Attributes:
        table: pandas DataFrame, one row per variable: ``n_elements``, ``max_abs_smd``,
            ``max_abs_z``, ``sd_ratio_min``, ``sd_ratio_max``, ``energy``, ``p_value``,
            ``n_a``/``n_b`` (draws after thinning), ``different``.
        elements: pandas DataFrame, one row per element: ``variable``, ``index``,
            ``mean_a``, ``mean_b``, ``sd_a``, ``sd_b``, ``ess_a``, ``ess_b``, ``smd``,
            ``z``, ``sd_ratio``.
        labels: names of the two posteriors.
        alpha: family-wise level of ``different`` (Bonferroni over variables).
        draws: {variable: (draws_a (chain, draw, k), draws_b (chain, draw, k))} flattened
            per element, for ``plot``.
    """

    table: object
    elements: object
    labels: tuple
    alpha: float
    draws: dict = dataclasses.field(repr=False)

    def __repr__(self) -> str:
        import pandas as pd

        with pd.option_context("display.width", 120, "display.max_columns", 20,
                               "display.float_format", "{:.3g}".format):
            body = self.table.to_string()
        return (f"PosteriorComparison({self.labels[0]!r} vs {self.labels[1]!r}; smd = "
                f"standardised mean difference, z = difference / ESS-based MC error, energy "
                f"distance with permutation p-value on ESS-thinned draws, different: p < "
                f"{self.alpha:g} / {len(self.table)} variables)\n{body}")

    def _repr_html_(self) -> str:
        return (f"<p><b>{self.labels[0]}</b> vs <b>{self.labels[1]}</b>: energy-distance "
                f"permutation test on ESS-thinned draws; different: p &lt; {self.alpha:g} / "
                f"{len(self.table)}</p>" + self.table.to_html(float_format="%.3g"))

    @property
    def different(self) -> list:
        """Names of the variables flagged different."""
        return [str(v) for v in self.table.index[self.table["different"]]]

    def plot(self, var_names=None, max_panels: int = 12, *, axes=None):
        """Overlay the two posteriors' marginals (ArviZ KDE) for the elements with the
        largest |smd|, at most ``max_panels``, into ``axes`` (one per element) or a new
        pyplot figure; returns the figure."""
        import matplotlib.pyplot as plt

        from ppgpc.evaluation.plotting import marginal_overlay

        rows = self.elements
        if var_names is not None:
            rows = rows[rows["variable"].isin(list(var_names))]
        order = np.argsort(-np.nan_to_num(np.abs(rows["smd"].to_numpy()), posinf=1e300))
        rows = rows.iloc[order[:max_panels]]
        if len(rows) == 0:
            raise ValueError("no elements to plot (check var_names)")
        if axes is not None:
            panels = np.ravel(np.asarray(axes, dtype=object))
            if len(panels) < len(rows):
                raise ValueError(f"axes has {len(panels)} axes for {len(rows)} panels")
            fig = panels[0].figure
        else:
            cols = min(4, len(rows))
            nrows = -(-len(rows) // cols)
            fig = plt.figure(figsize=(3.2 * cols, 2.4 * nrows), layout="constrained")
            panels = fig.subplots(nrows, cols, squeeze=False).ravel()
        for panel, (_, row) in zip(panels, rows.iterrows()):
            a, b = self.draws[row["variable"]]
            j = int(row["position"])
            marginal_overlay(panel, a[..., j], b[..., j], labels=self.labels,
                             title=f"{row['variable']}{row['index']}  smd={row['smd']:.2f}")
        for panel in panels[len(rows):]:
            panel.set_visible(False)
        panels[0].legend(fontsize=7, frameon=False)
        return fig


def _element_names(shape: tuple) -> list:
    return ["[" + ", ".join(map(str, idx)) + "]" for idx in np.ndindex(*shape)] if shape else [""]


def _select(post_a: dict, post_b: dict, var_names, labels) -> list:
    """``var_names`` (one or several), or every variable both posteriors have with the same
    per-draw shape; each checked to be in both, with that shape and finite draws."""
    if var_names is None:
        var_names = [v for v in post_a if v in post_b
                     and post_a[v].shape[2:] == post_b[v].shape[2:]]
        if not var_names:
            raise ValueError(f"the posteriors share no variable of the same shape: "
                             f"{sorted(post_a)} versus {sorted(post_b)}")
    else:
        var_names = [var_names] if isinstance(var_names, str) else list(var_names)
        for v in var_names:
            if v not in post_a or v not in post_b:
                raise ValueError(f"variable {v!r} is not in both posteriors "
                                 f"({sorted(post_a)} / {sorted(post_b)})")
            if post_a[v].shape[2:] != post_b[v].shape[2:]:
                raise ValueError(f"variable {v!r} has per-draw shape {post_a[v].shape[2:]} in "
                                 f"{labels[0]} but {post_b[v].shape[2:]} in {labels[1]}")
    for v in var_names:
        for label, post in zip(labels, (post_a, post_b)):
            finite = np.isfinite(np.asarray(post[v], dtype=np.float64))
            if not finite.all():
                raise ValueError(f"variable {v!r} of {label} has {int((~finite).sum())} "
                                 "non-finite value(s) (NaN or inf) in its draws; a broken "
                                 "posterior cannot be compared")
    return var_names


def _summary(draws: np.ndarray, max_draws: int):
    """Per-element mean, sd (ddof 1) and bulk ESS (k,) of (chain, draw, k) draws, and the
    (m, k) draws thinned to about their least ESS over varying elements, m <= max_draws."""
    flat = draws.reshape(-1, draws.shape[2])
    ess = _ess(draws)
    varying = np.ptp(flat, axis=0) > 0
    target = int(min(max_draws, np.min(ess[varying]) if varying.any() else max_draws))
    return flat.mean(axis=0), flat.std(axis=0, ddof=1), ess, _thin(draws, target)


def _compare_variable(name: str, a, b, shape: tuple, max_draws: int, num_permutations: int,
                      seed: int):
    """(table row, element rows) of one variable from its (chain, draw, k) draws ``a`` and
    ``b``: smd, z and sd ratio per element, the energy test on the thinned draws."""
    mean_a, sd_a, ess_a, thin_a = _summary(a, max_draws)
    mean_b, sd_b, ess_b, thin_b = _summary(b, max_draws)
    diff = mean_a - mean_b
    smd = _ratio(diff, np.sqrt(0.5 * (sd_a**2 + sd_b**2)))
    z = _ratio(diff, np.sqrt(sd_a**2 / ess_a + sd_b**2 / ess_b))
    sd_ratio = np.where((sd_a == 0) & (sd_b == 0), 1.0, _ratio(sd_a, sd_b))
    elements = [{"variable": name, "index": index, "position": j, "mean_a": mean_a[j],
                 "mean_b": mean_b[j], "sd_a": sd_a[j], "sd_b": sd_b[j], "ess_a": ess_a[j],
                 "ess_b": ess_b[j], "smd": smd[j], "z": z[j], "sd_ratio": sd_ratio[j]}
                for j, index in enumerate(_element_names(shape))]
    energy, p_value = energy_test(thin_a, thin_b, num_permutations=num_permutations, seed=seed)
    row = {"n_elements": a.shape[2], "max_abs_smd": float(np.max(np.abs(smd))),
           "max_abs_z": float(np.max(np.abs(z))), "sd_ratio_min": float(np.min(sd_ratio)),
           "sd_ratio_max": float(np.max(sd_ratio)), "energy": energy, "p_value": p_value,
           "n_a": thin_a.shape[0], "n_b": thin_b.shape[0]}
    return row, elements


def compare_posteriors(idata_a, idata_b, var_names=None, *, labels=("a", "b"),
                       max_draws: int = 300, num_permutations: int | None = None,
                       alpha: float = 0.01, seed: int = 0) -> PosteriorComparison:
    """Compare two posteriors variable by variable (module docstring for the statistics).

    Args:
        idata_a, idata_b: exports (``InferenceData`` or, under ArviZ 1, ``DataTree``: their
            ``posterior`` groups and point estimates), xarray Datasets or dicts of
            (chain, draw, ...) arrays.
        var_names: variables to compare (default: every variable both have with the same
            per-draw shape).
        labels: names of the two posteriors (tables and plots).
        max_draws: at most this many thinned draws of each posterior enter the energy test.
        num_permutations: permutations for the p-value (default: enough that the smallest
            attainable p-value, 1 / (1 + num_permutations), is below half the Bonferroni
            level alpha / number of variables, and at least 200).
        alpha: family-wise level of the ``different`` flag.
        seed: seed of the permutations.

    Returns:
        A ``PosteriorComparison`` (prints as a table; ``.plot()`` overlays marginals).

    Raises:
        ValueError: a requested variable is missing from one posterior, has different
            per-draw shapes or non-finite draws; a setting out of range.
    """
    import pandas as pd

    alpha = check_probability("alpha", alpha, kind="a level")
    max_draws = check_count("max_draws", max_draws, minimum=2)
    if num_permutations is not None:
        num_permutations = check_count("num_permutations", num_permutations)
    seed = check_seed(seed)
    post_a, post_b = _posterior(idata_a), _posterior(idata_b)
    var_names = _select(post_a, post_b, var_names, labels)
    if num_permutations is None:
        num_permutations = max(200, int(math.ceil(2.0 * len(var_names) / alpha)))
    rows, elements, draws = {}, [], {}
    for i, name in enumerate(var_names):
        a, b = (p[name].reshape(p[name].shape[:2] + (-1,)).astype(np.float64)
                for p in (post_a, post_b))
        draws[name] = (a, b)
        rows[name], more = _compare_variable(name, a, b, post_a[name].shape[2:], max_draws,
                                             num_permutations, seed + i)
        elements += more
    table = pd.DataFrame.from_dict(rows, orient="index")
    table["different"] = table["p_value"] < alpha / len(table)
    return PosteriorComparison(table=table, elements=pd.DataFrame(elements),
                               labels=tuple(map(str, labels)), alpha=float(alpha), draws=draws)
