"""GP algebra on arrays: kernels, factorisations, exact and sparse conditioning, simplex maps.

Nothing here knows a classifier. The models (``ppgpc.models``) build their NumPyro sites and
predictive distributions from these pieces; every function is pure, jit- and vmap-able, and
works in float64 (docs/math.md gives the equations in one notation).

* ``kernels``: stationary kernels (RBF, Matérn), written on a pair of points and vmapped
  once into a Gram matrix; their hyperparameters' priors and sites.
* ``linalg``: Cholesky factors with adaptive jitter that is reported, triangular solves and
  log-determinants; no explicit inverse anywhere.
* ``exact``: exact GP regression for several outputs that share one kernel and one noise
  vector (``condition``, ``predict``, joint draws, closed-form leave-one-out).
* ``sparse``: Titsias's collapsed bound and its optimal q(u), from data statistics summed
  over blocks of points; ``whitened``: that q(u) held as whitened draws, and the latent at
  any inputs given one.
* ``inducing``: how many inducing inputs, where they start, and the flat prior that lets an
  optimiser move them; ``kmeans``: the k-means++ and Lloyd refinement it starts from.
* ``simplex``: the isometric, centred and additive log-ratio transforms, label smoothing and
  the noise level of Proposition 1 (Helmert ILR).

How they fit: ``kernels`` gives K, ``linalg`` factors it, ``exact`` or ``sparse`` conditions
on (transformed) targets, ``whitened`` turns a posterior into draws the driver stores.
"""

from ppgpc import _config  # noqa: F401  (float64 and the compilation cache first)
from ppgpc.gp import exact, inducing, kernels, kmeans, linalg, simplex, sparse, whitened

__all__ = ["kernels", "linalg", "exact", "sparse", "whitened", "inducing", "kmeans", "simplex"]
