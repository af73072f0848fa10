"""Process-wide JAX configuration that ppgpc needs.

GP algebra (Cholesky factors of kernel matrices, log-determinants, triangular solves) loses
several digits in float32: a 1000 x 1000 RBF Gram matrix with a small noise term has a
condition number around 1e8, which float32 cannot factorise reliably. ppgpc therefore turns
on JAX's 64-bit mode (``jax_enable_x64``) when it is imported. This is a global JAX setting:
arrays created afterwards default to float64 in the whole process. It is done here, once,
deliberately, and nowhere else.
"""

import jax

jax.config.update("jax_enable_x64", True)

__all__: list[str] = []
