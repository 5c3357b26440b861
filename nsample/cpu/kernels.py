"""nsample's C++ kernels (`csrc/`), built once per machine and instruction set with torch's cpp_extension; None
where they cannot be.

- int8_rows.cpp: the float work around the two-level int8 GEMM (int8_linear.py), bitwise the ATen ops it replaces.
- gguf_block.h, gguf_formats.h, gguf_kquants.h, gguf_iquants.h, gguf_iq_grids.h (its tables gguf_iq_grid_tables.h,
  written by scripts/make_iq_grids.py), gguf_tile.h, gguf_linear.cpp, gguf_pack.cpp, gguf_expand.cpp: linear layers
  on a GGUF's own blocks, read as the file holds them (gguf_model.py): the decode product, and the blocks expanded
  to float32.
- q8_block.h, q8_formats.h, q8_kquants.h, q8_rows.h, q8_tile_x86.h, q8_with_format.h, q8_linear.cpp,
  q8_quantize.cpp: the decode product with the activations rounded to int8 (x86; on ARM64 q8_neon.h,
  q8_neon_kquants.h and q8_tile_neon.h).
- linear.cpp: a decode-time linear layer of either kind; decode_layer.cpp and attention.cpp: the rest of a Llama-style
  layer's decode step around it (fused_decode.py); vec_math.h: their e^x and dot product; experts.h, moe.cpp: a
  mixture of experts' layer on a GGUF's expert tensors (gguf_experts.py).
- race.cpp: the sampler's exponential race (nsample/engine/sampler.py), one pass a row.
The sources are written once on torch's portable vector layer (`at::vec::Vectorized`, what torch's own CPU kernels
use) and compiled per instruction set: AVX-512 or AVX2 (with FMA and F16C) on x86-64, each with VNNI's integer dot
products for the int8-activation kernels where the CPU has them, NEON on ARM64 (with ARMv8.2's dot product, neondot,
where the CPU has it). The set is picked at run time from
what this CPU and torch support (`isa()`), or forced with NSAMPLE_ISA=avx2|avxvnni|avx512|avx512vnni|neon|neondot.
They are compiled (g++, or clang with OpenMP as openmp() says, macOS's included, and ninja; a few minutes on 2
cores) the first time a quantized model (or a hub model as its checkpoint's rows) loads, into $TORCH_EXTENSIONS_DIR
(else ~/.cache/torch_extensions), keyed by torch version and instruction set; later loads take the built library;
`nsample build-kernels` builds them ahead of a first start. One process builds at a time; another waits for it at
most NSAMPLE_KERNEL_WAIT_S seconds (default 600), and a build stopped midway never hangs the next start
(build_lock.py). Without a compiler, on a CPU
without AVX2 or NEON, past that wait, or with NSAMPLE_NO_CPP=1, the ATen ops in int8_linear.py run instead, a GGUF's
blocks are dequantized at load, and decode steps go through transformers.
"""
import functools
import hashlib
import logging
import os
import platform
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import torch

from nsample.cpu.build_lock import BuildBusy, build_lock, wait_s
from nsample.cpu.instruction_sets import ISA_FLAGS

log = logging.getLogger(__name__)
CSRC = Path(__file__).with_name("csrc")
SOURCES = [CSRC / f for f in ("bindings.cpp", "int8_rows.cpp", "gguf_linear.cpp", "gguf_expand.cpp",
                              "gguf_pack.cpp", "q8_linear.cpp", "q8_quantize.cpp", "linear.cpp", "decode_layer.cpp",
                              "attention.cpp", "moe.cpp", "race.cpp")]
FP = ["-ffp-contract=off"]  # no fused multiply-adds but the written ones: the same roundings as the ATen ops
TORCH_CAPABILITY = {"AVX512": "avx512", "AVX2": "avx2"}  # torch.backends.cpu.get_cpu_capability() -> ours
_lock = threading.Lock()
_built: dict[str, object] = {}  # ISA -> the extension module, or None where it could not be had


def isa() -> str | None:
    """The instruction set the kernels are built for here: NSAMPLE_ISA if set, else the best this CPU has (as
    torch's own dispatch sees it), or None where there is none (no AVX2 on x86, an unknown machine)."""
    forced = os.environ.get("NSAMPLE_ISA", "").lower()
    if forced and forced != "auto":
        if forced not in ISA_FLAGS:
            raise ValueError(f"NSAMPLE_ISA must be one of auto, {', '.join(ISA_FLAGS)}; got {forced!r}")
        return forced
    return _best()


def runnable() -> list[str]:
    """Every instruction set this CPU runs the kernels in, best last (an AVX-512 machine runs AVX2 too)."""
    if platform.machine().lower() in ("arm64", "aarch64"):
        return ["neon", "neondot"] if "asimddp" in _cpu_flags() else ["neon"]
    best = TORCH_CAPABILITY.get(torch.backends.cpu.get_cpu_capability())
    found = {"avx2": best is not None, "avxvnni": best is not None and "avx_vnni" in _cpu_flags(),
             "avx512": best == "avx512",
             "avx512vnni": best == "avx512" and getattr(torch.cpu, "_is_vnni_supported", lambda: False)()}
    return [which for which, has in found.items() if has]  # AVX512_VNNI as torch's cpuinfo reads it


def _best() -> str | None:
    return (runnable() or [None])[-1]


@functools.cache
def _cpu_flags() -> frozenset[str]:
    """The CPU's flags as Linux lists them (/proc/cpuinfo; none elsewhere, macOS included), for what torch does not
    report: AVX-VNNI (`avx_vnni`: VNNI's dot products on 256-bit registers, Intel clients since Alder Lake, which have
    no AVX-512) and ARMv8.2's int8 dot product (`asimddp`: Graviton 2 on, Neoverse, Cortex-A76 on). On macOS the neon
    build has the dot product already: Apple's clang builds for Apple's cores, which all have it."""
    try:
        return frozenset(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return frozenset()


def ops():
    """The built extension for `isa()` (csrc/bindings.cpp lists its functions), or None: disabled, no ISA, it
    could not be built, or another process's build outlasted the wait (the reason is logged once)."""
    which = isa()
    if which not in _built:
        with _lock:
            if which not in _built:
                _built[which] = None if os.environ.get("NSAMPLE_NO_CPP") or which is None else _first_built(which)
    return _built[which]


def loaded():
    """The extension for isa() where this process has it already (loading a quantized model builds it), else None:
    for callers that may use the kernels but must never start a build, such as the sampler."""
    try:
        return _built.get(isa())
    except ValueError:  # a bad NSAMPLE_ISA: ops() says so where it matters
        return None


def built_isa() -> str | None:
    """The instruction set of the kernels that run here: isa(), or after a fallback (`_first_built`) the set that
    was built instead; None where none run."""
    module = ops()
    return None if module is None else module.__name__.removeprefix("nsample_kernels_")


def _first_built(which: str):
    """`which`'s extension, or None. Where `which` is this CPU's best (not forced) and does not compile (a compiler
    too old for its flags: -mavxvnni needs GCC 11), the next set down that does, as the CPU runs those too; not
    after another process's build outlasted the wait, as the next set would wait the same way."""
    forced = os.environ.get("NSAMPLE_ISA", "auto").lower() not in ("", "auto")
    sets = runnable()
    lower = [] if forced or which not in sets else sets[:sets.index(which)][::-1]
    for at, each in enumerate([which, *lower]):
        try:
            return build(each)
        except Exception as e:  # noqa: BLE001 - no compiler, no ninja, a read-only home: the ATen ops still work
            last = at == len(lower) or isinstance(e, BuildBusy)
            then = "using ATen ops, which are slower" if last else f"trying {lower[at]}"
            log.warning("nsample's C++ kernels are not available for %s (%s); %s", each, e, then)
            if last:
                return None


def build(which: str):
    """The extension for `which`, built here first where it is not yet: torch's load, under build_lock. Raises why
    it cannot be had (no compiler or ninja, a read-only cache, another process's build past the bounded wait)."""
    from torch.utils.cpp_extension import load

    where = build_directory(which)
    _ninja_on_path()
    where.mkdir(parents=True, exist_ok=True)
    with build_lock(where, wait_s()):
        if not any(where.glob("*.so")):
            log.warning("building nsample's C++ kernels for %s into %s (once, a few minutes)", which, where)
        cflags, ldflags = flags(which)
        return load(name=_name(which), sources=[str(s) for s in SOURCES], build_directory=str(where),
                    extra_cflags=cflags, extra_ldflags=ldflags, verbose=False)


def flags(which: str, csrc: Path = CSRC) -> tuple[list[str], list[str]]:
    """The compile and link flags of `which`'s build of the sources in csrc, by torch's compiler ($CXX, else c++).
    torch rebuilds on changed sources or flags, not headers: their hash is a flag."""
    from torch.utils.cpp_extension import get_cxx_compiler

    headers = hashlib.sha256(b"".join(h.read_bytes() for h in sorted(csrc.glob("*.h")))).hexdigest()[:16]
    compile_flags, link_flags = openmp(get_cxx_compiler())
    return ["-O3", *compile_flags, *FP, *ISA_FLAGS[which], f"-DNSAMPLE_HEADERS={headers}"], link_flags


@functools.cache
def openmp(compiler: str) -> tuple[list[str], list[str]]:
    """The compile and link flags that make at::parallel_for's loops, inline in the kernels' own code, run on
    OpenMP's threads as torch's own ops do: -fopenmp for GCC; for LLVM's clang also at link, for its libomp. On
    macOS, whose clang has no -fopenmp of its own, torch's wheel ships LLVM's omp.h (torch/include) and the
    libomp.dylib torch runs on (torch/lib, on the link's library path): -Xpreprocessor -fopenmp and -lomp, with
    torch/lib as a run path for its install name (@rpath/libomp.dylib). Where a Mac's torch has no omp.h, none: the
    kernels build and run on one thread (logged)."""
    from torch.utils.cpp_extension import TORCH_LIB_PATH, include_paths

    if sys.platform == "darwin":
        if any((Path(d) / "omp.h").exists() for d in include_paths()) and any(Path(TORCH_LIB_PATH).glob("libomp*")):
            return ["-Xpreprocessor", "-fopenmp"], ["-lomp", f"-Wl,-rpath,{TORCH_LIB_PATH}"]  # @rpath/libomp.dylib
        log.warning("torch has no omp.h or libomp here: nsample's C++ kernels will run on one thread")
        return [], []
    return ["-fopenmp"], ["-fopenmp"] if _clang(compiler) else []


def _clang(compiler: str) -> bool:
    """Whether `compiler` ($CXX: a command, perhaps with a wrapper such as ccache before it) is clang."""
    try:
        return "clang" in subprocess.run([*shlex.split(compiler), "--version"], capture_output=True, text=True,
                                         timeout=60).stdout
    except (OSError, ValueError, subprocess.SubprocessError):
        return False


def build_directory(which: str) -> Path:
    """Where `which`'s build lives: one directory per torch version and instruction set, as a library built
    against one torch does not load in another."""
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR", Path.home() / ".cache" / "torch_extensions"))
    return root / f"{_name(which)}-torch{torch.__version__.replace('+', '-')}"


def _name(which: str) -> str:
    return f"nsample_kernels_{which}"


def _ninja_on_path() -> None:
    """torch runs `ninja` from PATH; a virtualenv's pip-installed ninja is not on it unless the venv is active."""
    if shutil.which("ninja") is None:
        try:
            import ninja
        except ImportError:
            return
        os.environ["PATH"] = os.pathsep.join([ninja.BIN_DIR, os.environ.get("PATH", "")])
