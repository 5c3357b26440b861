"""pytest plugin for scripts/arm64_check.py's emulated run: nsample's kernels are the cross-compiled library named by
NSAMPLE_ARM64_KERNELS, loaded where nsample would build them (kernels.build), as no compiler runs under emulation;
and the tests' waits for a result are NSAMPLE_ARM64_SLOWER times as long (default 30), as emulation is that slow."""
import importlib.util
import os

from nsample.cpu import kernels
from nsample.request import Request


def prebuilt(which: str):
    if which != "neon":
        raise RuntimeError(f"only the neon kernels are cross-compiled here, not {which}")
    spec = importlib.util.spec_from_file_location("nsample_kernels_neon", os.environ["NSAMPLE_ARM64_KERNELS"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def patient(result, slower: float):
    def wait(self, timeout: float | None = None):
        return result(self, None if timeout is None else timeout * slower)
    return wait


kernels.build = prebuilt
Request.result = patient(Request.result, float(os.environ.get("NSAMPLE_ARM64_SLOWER", "30")))
