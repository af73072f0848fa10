"""The save format: a fitted ``FitResult`` or estimator as a folder of netCDF arrays and JSON.

No pickle: a save is ``settings.json`` (what it is, its settings, small fitted attributes)
and ``arrays.nc`` (the posterior's arrays and the training data), and loading trusts
nothing in the folder.

* ``format``: what settings.json may hold (tagged arrays, kernels, fitted attributes, the
  allow-lists a load checks) and the format versions this ppgpc reads;
* ``folders``: the folder of a save, written atomically under a lock and read as one
  complete save even while another process replaces it;
* ``persistence``: a ``FitResult`` or an estimator to a save and back (the estimator
  classes a save may name are passed in by the caller, ``ppgpc.estimators.saving``);
* ``legacy``: estimator settings of older format versions, translated to today's options.

``ppgpc.save`` and ``ppgpc.load`` are the entry points; ``estimator.save(path)`` and
``Class.load(path)`` do the same for one estimator.
"""

from ppgpc import _config  # noqa: F401  (float64 and the compilation cache first)
from ppgpc.io.persistence import load_estimator, load_result, save_estimator, save_result

__all__ = ["save_result", "load_result", "save_estimator", "load_estimator"]
