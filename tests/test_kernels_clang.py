"""nsample's C++ kernels built by clang pass the kernels' own tests.

clang is the compiler macOS has (Apple's is LLVM's clang), and it takes OpenMP otherwise than GCC: -fopenmp at link
too, for LLVM's runtime (libomp), and on macOS -Xpreprocessor -fopenmp with the omp.h and libomp.dylib torch's wheel
ships (kernels.openmp). Here the kernels are built for AVX2 by Debian's clang with LLVM's libomp, in a directory of
their own, and the block-format, sampler-race, fused-decode and GGUF-model tests run on that build in a process of
their own. `scripts/arm64_check.py --clang` does the same for NEON under qemu (not part of the suite: emulated, it
takes an hour).
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsample.cpu import kernels

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from arm64_check import TESTS  # noqa: E402 - the kernels' test files, as the ARM64 check runs them


@pytest.mark.skipif("avx2" not in kernels.runnable(), reason="the AVX2 kernels do not run on this CPU")
def test_the_kernel_tests_pass_on_a_clang_build(tmp_path):
    env = {**os.environ, "CXX": "clang++", "TORCH_EXTENSIONS_DIR": str(tmp_path), "NSAMPLE_ISA": "avx2"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1]  # not all skipped, as where the kernels did not build
    library = next(tmp_path.glob("nsample_kernels_avx2-*/nsample_kernels_avx2.so"))
    comment = subprocess.run(["readelf", "-p", ".comment", library], capture_output=True, text=True).stdout
    assert "clang version" in comment  # built by clang, not a GCC build found elsewhere
    linked = subprocess.run(["ldd", library], capture_output=True, text=True).stdout
    assert "libomp" in linked  # on LLVM's OpenMP runtime: at::parallel_for's loops compiled as OpenMP's
