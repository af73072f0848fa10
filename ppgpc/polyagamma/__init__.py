"""Pólya-Gamma random variables PG(b, z): a JAX-native sampler, moments and density.

The Pólya-Gamma augmentation of docs/math.md section 3 draws one omega_ic ~ PG(y'_ic + n_ic,
|f_ic|) per point and class in every Gibbs sweep (block 4). This package provides that draw
as a pure, jit- and vmap-able function, the closed-form moments used by the tests and by
CAVI, the alternating-series density, and a NumPyro distribution wrapping all three.

Definition (Polson, Scott & Windle 2013). For b > 0 and real z,

    PG(b, z) = 1 / (2 pi^2) sum_{k >= 1} g_k / ((k - 1/2)^2 + z^2 / (4 pi^2)),
    g_k ~ Gamma(b, 1) independent,

so PG(b, z) is the sum of b independent PG(1, z) variables for integer b, it depends on z
only through |z|, and PG(0, z) is the point mass at 0. Its Laplace transform is
E[exp(-t omega)] = cosh^b(z/2) / cosh^b(sqrt(z^2/4 + t/2)), whence (docs/math.md section 3)

    E[PG(b, z)]   = b / (2 z) tanh(z / 2)                              (b / 4 at z = 0),
    Var[PG(b, z)] = b (sinh z - z) / (4 z^3 cosh^2(z / 2))             (b / 24 at z = 0).

Sampling (`sample_polyagamma`):

* integer b <= ``exact_threshold`` (default 20): exact. Each PG(1, z) term is drawn by
  Devroye's alternating-series rejection sampler for J*(1, |z|/2) = 4 PG(1, z) with
  truncation point t = 0.64, and b such terms are summed. One vectorised ``lax.while_loop``
  tracks, per element, the number of PG(1) terms still owed (b = 0 owes nothing and gives
  exactly 0), and hands the last few unfinished elements to a smaller loop.
* b > ``exact_threshold`` (or non-integer b): an approximation that matches the first
  three cumulants exactly. For |z| < 12 the two leading terms of the series above are drawn
  exactly (two Gamma(b, 1) draws) and the remainder is replaced by a shifted inverse
  Gaussian with the remainder's mean, variance and third cumulant; for |z| >= 12 the whole
  variable is a shifted inverse Gaussian with the three cumulants of PG(b, z) (at large z,
  J*(b, z) is inverse Gaussian IG(b/z, b^2) up to terms of order e^{-2z}). Its largest
  CDF error (Gil-Pelaez inversion of the characteristic functions) falls like 1/b.

The moments and the alternating-series density (`polyagamma_mean`, `polyagamma_variance`,
`polyagamma_log_prob`) are in ``moments``; the two rejection samplers in ``samplers``;
``distribution`` dispatches between them and wraps all three as a NumPyro distribution.
How fast each sampler is, and the approximations that were measured and not kept:
docs/records/polyagamma.md.
"""

from ppgpc import _config  # noqa: F401  (float64 and the compilation cache first)
from ppgpc.polyagamma.distribution import DEFAULT_EXACT_THRESHOLD, PolyaGamma, sample_polyagamma
from ppgpc.polyagamma.moments import (DEFAULT_NUM_TERMS, polyagamma_log_prob, polyagamma_mean,
                                      polyagamma_variance)

__all__ = ["PolyaGamma", "sample_polyagamma", "polyagamma_mean", "polyagamma_variance",
           "polyagamma_log_prob", "DEFAULT_EXACT_THRESHOLD", "DEFAULT_NUM_TERMS"]
