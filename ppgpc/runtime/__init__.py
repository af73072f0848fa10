"""How ppgpc's programs run: fixed shapes, a bound on compiled programs, device blocks, progress.

XLA compiles a program per shape, and a process that fits many models must neither compile
for every training size nor keep every program it ever compiled. These modules are the
mechanics behind that, shared by the models and the driver:

* ``padding``: training data padded to a few bucket sizes with rows that change nothing
  (a row mask, identity prior blocks, zero likelihood weight), so every N of a bucket runs
  the same programs;
* ``programs``: the shapes a process has trained on and a bound on the compiled programs it
  keeps (memory mappings counted, caches cleared past a ceiling);
* ``blocks``: sums over the data in fixed-size blocks, on one device or across the devices
  of a mesh (``Placement``, ``sum_blocks``), so memory is one block's, never O(N M);
* ``progress``: progress lines and bars on stderr for long loops, silent when disabled;
* ``loop``: the one loop of every iterative method, compiled windows until the algorithm's
  check stops it or a cap, with one display and one record of why it stopped;
* ``threads``: one BLAS thread inside a fit, the user's setting restored after it;
* ``chains``: a sampler's chains side by side on a CPU, one per core, each chain's draws
  those it draws alone.
"""

from ppgpc import _config  # noqa: F401  (float64 and the compilation cache first)
from ppgpc.runtime import blocks, chains, loop, padding, programs, progress, threads

__all__ = ["padding", "programs", "blocks", "progress", "loop", "threads", "chains"]
