"""pytest plugin for scripts/arm64_check.py's emulated run: nsample's kernels are the cross-compiled library named by
NSAMPLE_ARM64_KERNELS, built for NSAMPLE_ARM64_ISA (neon or neondot), loaded where nsample would build them
(kernels.build), as no compiler runs under emulation, and the one set the tests see as this CPU's (kernels.runnable);
and the tests' waits for a result are NSAMPLE_ARM64_SLOWER times as long (default 30), as emulation is that slow."""
import importlib.util
import os

from nsample.cpu import kernels
from nsample.request import Request

ISA = os.environ.get("NSAMPLE_ARM64_ISA", "neon")  # the set the library was built for (arm64_check.py --isa)


def prebuilt(which: str):
    if which != ISA:
        raise RuntimeError(f"only the {ISA} kernels are cross-compiled here, not {which}")
    spec = importlib.util.spec_from_file_location(f"nsample_kernels_{ISA}", os.environ["NSAMPLE_ARM64_KERNELS"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def patient(result, slower: float):
    def wait(self, timeout: float | None = None):
        return result(self, None if timeout is None else timeout * slower)
    return wait


kernels.build = prebuilt
kernels.runnable = lambda: [ISA]  # what this emulated CPU is taken to run: the one set built (qemu's CPU has them all)
Request.result = patient(Request.result, float(os.environ.get("NSAMPLE_ARM64_SLOWER", "30")))
