"""ppgpc: calibrated multi-class Gaussian-process classifiers as NumPyro models on JAX."""

from ppgpc import _config  # noqa: F401  (enables float64 in JAX before anything else)

__version__ = "0.1.0"
