"""Process-wide configuration that ppgpc needs, applied once when ppgpc is imported.

1. float64. GP algebra (Cholesky factors of kernel matrices, log-determinants, triangular
   solves) loses several digits in float32: a 1000 x 1000 RBF Gram matrix with a small noise
   term has a condition number around 1e8, which float32 cannot factorise reliably. ppgpc
   turns on JAX's 64-bit mode (``jax_enable_x64``). This is a global JAX setting: arrays
   created afterwards default to float64 in the whole process.

2. One OpenBLAS thread for LAPACK. On CPU, JAX runs Cholesky factorisations and triangular
   solves through SciPy's bundled OpenBLAS, whose thread pool competes with XLA's own
   threads. Measured on a 2-core machine: the gradient of a 60 x 60 Cholesky-based
   log-likelihood takes 64 ms with OpenBLAS's default threading and 1 ms with one thread
   (a triangular solve with 60 right-hand sides: 8 ms versus 0.3 ms). ppgpc therefore sets
   ``OPENBLAS_NUM_THREADS=1`` unless the variable is already set. SciPy's OpenBLAS is
   loaded at the first LAPACK call, so this takes effect as long as no JAX linear algebra
   ran before ppgpc was imported; set the variable yourself to choose another value.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

__all__: list[str] = []
