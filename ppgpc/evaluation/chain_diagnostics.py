"""Rank-normalised split R-hat and bulk and tail effective sample sizes, vectorised over
every entry of an array of draws.

The definitions are those of Vehtari, Gelman, Simpson, Carpenter & Buerkner (2021),
"Rank-normalization, folding, and localization: an improved R-hat for assessing convergence
of MCMC", Bayesian Analysis 16(2), as ArviZ implements them (``az.rhat(method="rank")``,
``az.ess(method="bulk")`` and ``az.ess(method="tail", prob=0.05)``, in ArviZ 0.2x and 1;
ArviZ 1's default tail takes the quantiles of its ``rcParams["stats.ci_prob"]``, 0.11 and
0.89, so its ``az.summary`` prints another tail ESS). For the draws x (chain, draw) of one
entry:

* split: each chain cut into halves (the middle draw of an odd chain dropped), m chains of
  n draws;
* rank-normalise: z = Phi^-1((r - 3/8) / (S + 1/4)), r the average rank of each draw among
  all S = m n pooled draws;
* R-hat = max(R-hat of z, R-hat of the rank-normalised folded draws |x - median(x)|), with
  the classic R-hat sqrt(((n - 1) / n W + B / n) / W) over the split chains (W the mean
  within-chain variance, B / n the variance of the chain means);
* ESS = S / tau, tau = -1 + 2 sum_k P_k over Geyer's initial monotone sequence of the sums
  P_k = rho_2k + rho_2k+1 of the autocorrelations rho_t = 1 - (W - mean_c gamma_ct) / var+
  (Geyer 1992; as NumPyro's ``effective_sample_size``); bulk ESS is the ESS of z, tail ESS
  the smaller ESS of the indicators I(x <= q_0.05) and I(x <= q_0.95).

R-hat equals ArviZ's to rounding; the ESS follows NumPyro's truncation of Geyer's sequence,
within a few percent of ArviZ's. ArviZ computes one entry at a time in Python; these work
on all entries at once (ranks by one sort, autocovariances by one FFT), so ten thousand
latent entries take about a second. ``tests/infer/test_convergence.py`` checks them against
ArviZ.
"""

from __future__ import annotations

import numpy as np

__all__ = ["chain_diagnostics", "rhat", "ess_bulk", "ess_tail", "MIN_DRAWS"]

MIN_DRAWS = 4
"""Fewest draws per chain for which the diagnostics are defined (NaN below)."""


def _entries_first(draws) -> tuple[np.ndarray, tuple]:
    """(k, chain, draw) float64 copy of (chain, draw, ...) draws, and the entries' shape."""
    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim < 2:
        raise ValueError(f"draws must be shaped (chain, draw, ...), got {draws.shape}")
    shape = draws.shape[2:]
    flat = draws.reshape(draws.shape[:2] + (-1,))
    return np.ascontiguousarray(np.moveaxis(flat, 2, 0)), shape


def _split(x: np.ndarray) -> np.ndarray:
    """(k, 2 chain, draw // 2): every chain cut into its first and last halves."""
    half = x.shape[2] // 2
    return np.concatenate([x[:, :, :half], x[:, :, x.shape[2] - half:]], axis=1)


def _average_ranks(a: np.ndarray) -> np.ndarray:
    """Ranks 1..S along the last axis, ties given their average rank (as
    ``scipy.stats.rankdata(method="average")``, which is slow along an axis)."""
    S = a.shape[-1]
    order = np.argsort(a, axis=-1)  # equal values share one rank, so their order is moot
    values = np.take_along_axis(a, order, axis=-1)
    index = np.broadcast_to(np.arange(S), a.shape)
    starts = np.ones(a.shape, dtype=bool)
    starts[..., 1:] = values[..., 1:] != values[..., :-1]
    ends = np.ones(a.shape, dtype=bool)
    ends[..., :-1] = starts[..., 1:]
    first = np.maximum.accumulate(np.where(starts, index, 0), axis=-1)
    last = np.flip(np.minimum.accumulate(np.flip(np.where(ends, index, S), -1), axis=-1), -1)
    ranks = np.empty(a.shape)
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=-1)
    return ranks


def _rank_normalize(x: np.ndarray) -> np.ndarray:
    """Normal scores of the ranks of every entry's pooled draws, x (k, chain, draw)."""
    from scipy.special import ndtri

    k, m, n = x.shape
    ranks = _average_ranks(x.reshape(k, m * n))
    return ndtri((ranks - 0.375) / (m * n + 0.25)).reshape(x.shape)


def _classic_rhat(split: np.ndarray) -> np.ndarray:
    """sqrt(var+ / W) of every entry of split chains (k, chain, draw)."""
    n = split.shape[2]
    within = np.mean(np.var(split, axis=2, ddof=1), axis=1)
    between = n * np.var(np.mean(split, axis=2), axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(((n - 1) / n * within + between / n) / within)


def _ess(split: np.ndarray) -> np.ndarray:
    """Geyer's initial-monotone ESS of every entry of split chains (k, chain, draw)."""
    k, m, n = split.shape
    centred = split - split.mean(axis=2, keepdims=True)
    from scipy import fft

    size = fft.next_fast_len(2 * n - 1, real=True)  # zero-padded: no circular wrap-around
    spectrum = fft.rfft(centred, n=size, axis=2)
    gamma = fft.irfft(spectrum * np.conj(spectrum), n=size, axis=2)[:, :, :n] / n
    within = np.mean(np.var(split, axis=2, ddof=1), axis=1)                  # W (k,)
    var_plus = (n - 1) / n * within + np.var(np.mean(split, axis=2), axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = 1.0 - (within[:, None] - gamma.mean(axis=1)) / var_plus[:, None]  # (k, n)
    rho[:, 0] = 1.0
    pairs = rho[:, :-1:2] + rho[:, 1::2]                                      # P_0, P_1 ...
    pairs = np.concatenate([pairs[:, :1], np.minimum.accumulate(
        np.clip(pairs[:, 1:], 0.0, None), axis=1)], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return m * n / (-1.0 + 2.0 * pairs.sum(axis=1))


def chain_diagnostics(draws) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(R-hat, bulk ESS, tail ESS) of every entry of (chain, draw, ...) draws, each shaped
    like one draw; NaN below ``MIN_DRAWS`` draws per chain and for a constant entry."""
    x, shape = _entries_first(draws)
    if x.shape[2] < MIN_DRAWS:
        nan = np.full(shape, np.nan)
        return nan, nan.copy(), nan.copy()
    split = _split(x)
    z = _rank_normalize(split)
    folded = np.abs(split - np.median(x.reshape(x.shape[0], -1), axis=1)[:, None, None])
    rhat = np.fmax(_classic_rhat(z), _classic_rhat(_rank_normalize(folded)))
    constant = np.ptp(x.reshape(x.shape[0], -1), axis=1) == 0
    rhat[constant] = np.nan
    bulk = _ess(z)
    pooled = x.reshape(x.shape[0], -1)
    tail = None
    for q in (0.05, 0.95):
        below = (split <= np.quantile(pooled, q, axis=1)[:, None, None]).astype(np.float64)
        ess = _ess(below)
        tail = ess if tail is None else np.fmin(tail, ess)
    bulk[constant] = tail[constant] = np.nan
    return rhat.reshape(shape), bulk.reshape(shape), tail.reshape(shape)


def rhat(draws) -> np.ndarray:
    """Rank-normalised split R-hat of every entry of (chain, draw, ...) draws."""
    return chain_diagnostics(draws)[0]


def ess_bulk(draws) -> np.ndarray:
    """Bulk ESS (rank-normalised split chains) of every entry of (chain, draw, ...) draws."""
    return chain_diagnostics(draws)[1]


def ess_tail(draws) -> np.ndarray:
    """Tail ESS (5% and 95% quantile indicators) of every entry of (chain, draw, ...)
    draws."""
    return chain_diagnostics(draws)[2]
