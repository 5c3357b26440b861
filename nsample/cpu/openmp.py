"""Keeping GNU OpenMP from throttling the engine: one thread pool at a time, the decode worker's.

torch's CPU build runs its parallel ops on GNU OpenMP, which gives every thread that starts a parallel
region a pool of its own. Once the pools together hold more threads than there are cores, every pool
stops spin-waiting between parallel regions and sleeps instead, and a decode step, hundreds of short
parallel ops, slows down: measured on the 2-core machine, the int8 path went from 106 to 57 tokens/s
at n=8 when the thread that had loaded the model kept its pool. So threads other than the engine's
worker free their pool when their torch work is done (loading, quantizing, sentence embeddings), and the
worker frees its own whenever it goes idle: with two engines in one process (a float32 and a quantized one,
say), the idle one's pool halved the other's speed (34 against 18 tokens/s at n=1).
"""
import ctypes
import functools
import glob
import os

import torch

OMP_PAUSE_SOFT = 1  # omp_pause_resource_t: free the threads, keep what is cheap to keep


@functools.cache
def _libgomp():
    """torch's own libgomp, or None (other OpenMP runtimes and builds: nothing to do)."""
    found = glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp*.so*"))
    try:
        lib = ctypes.CDLL(found[0]) if found else None
    except OSError:
        return None
    return lib if lib is not None and hasattr(lib, "omp_pause_resource_all") else None


def release_pool() -> None:
    """Free the calling thread's OpenMP thread pool (it is made again if this thread runs parallel ops later)."""
    if (lib := _libgomp()) is not None:
        lib.omp_pause_resource_all(OMP_PAUSE_SOFT)
