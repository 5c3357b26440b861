"""Which kernels a process takes (nsample/cpu/kernels.py): this CPU's best instruction set, and where that one does not
compile (a compiler too old for -mavxvnni, say), the next one down that does; never past a forced NSAMPLE_ISA or
another process's build that outlasted the wait."""
import logging
import types

import pytest

from nsample.cpu import kernels
from nsample.cpu.build_lock import BuildBusy

SETS = ["avx2", "avxvnni", "avx512", "avx512vnni"]


@pytest.fixture
def builds(monkeypatch):
    """A CPU that runs SETS, whose builds fail as `failing` says ({set: exception}); returns the sets tried."""
    tried, failing = [], {}

    def build(which):
        tried.append(which)
        if which in failing:
            raise failing[which]
        return types.ModuleType(f"nsample_kernels_{which}")  # what torch's load returns, by its name

    monkeypatch.setattr(kernels, "_built", {})
    monkeypatch.setattr(kernels, "runnable", lambda: SETS)
    monkeypatch.setattr(kernels, "build", build)
    monkeypatch.delenv("NSAMPLE_ISA", raising=False)
    monkeypatch.delenv("NSAMPLE_NO_CPP", raising=False)
    return tried, failing


def test_the_best_set_is_taken_where_it_builds(builds):
    tried, _ = builds
    assert kernels.isa() == kernels.built_isa() == "avx512vnni" and tried == ["avx512vnni"]
    assert kernels.ops().__name__ == "nsample_kernels_avx512vnni"


def test_a_set_that_does_not_compile_falls_to_the_next_one_down(builds, caplog):
    tried, failing = builds
    failing.update(avx512vnni=RuntimeError("Error building extension: unknown -mavx512vnni"),
                   avx512=RuntimeError("Error building extension"))
    with caplog.at_level(logging.WARNING, logger=kernels.__name__):
        assert kernels.ops().__name__ == "nsample_kernels_avxvnni"
    assert tried == ["avx512vnni", "avx512", "avxvnni"]
    assert "not available for avx512vnni (Error building extension: unknown -mavx512vnni); trying avx512" in caplog.text
    assert kernels.built_isa() == "avxvnni" and kernels.isa() == "avx512vnni"  # what runs, and what was asked for
    assert kernels.ops().__name__ == "nsample_kernels_avxvnni" and len(tried) == 3  # once per process


def test_when_none_compiles_the_aten_ops_run(builds, caplog):
    tried, failing = builds
    failing.update({s: RuntimeError("no g++ here") for s in SETS})
    with caplog.at_level(logging.WARNING, logger=kernels.__name__):
        assert kernels.ops() is None and kernels.built_isa() is None
    assert tried == SETS[::-1] and "not available for avx2 (no g++ here); using ATen ops" in caplog.text


def test_a_forced_set_is_that_set_or_none(builds, monkeypatch):
    tried, failing = builds
    monkeypatch.setenv("NSAMPLE_ISA", "avxvnni")
    failing["avxvnni"] = RuntimeError("Error building extension")
    assert kernels.ops() is None and tried == ["avxvnni"]


def test_a_busy_build_elsewhere_is_not_followed_by_another_set(builds):
    tried, failing = builds
    failing["avx512vnni"] = BuildBusy("another process was still building them")
    assert kernels.ops() is None and tried == ["avx512vnni"]


@pytest.mark.parametrize("ships", [True, False])
def test_on_macos_openmp_is_the_omp_h_and_libomp_torch_ships(monkeypatch, tmp_path, caplog, ships):
    """Apple's clang has no -fopenmp: the preprocessor takes it, on torch's omp.h, and the link torch's libomp. A
    torch without them builds the kernels without OpenMP (one thread), and says so."""
    from torch.utils import cpp_extension

    (tmp_path / "include").mkdir()
    (tmp_path / "lib").mkdir()
    if ships:
        (tmp_path / "include/omp.h").write_text("")
        (tmp_path / "lib/libomp.dylib").write_bytes(b"")
    monkeypatch.setattr(kernels.sys, "platform", "darwin")
    monkeypatch.setattr(cpp_extension, "include_paths", lambda *a, **k: [str(tmp_path / "include")])
    monkeypatch.setattr(cpp_extension, "TORCH_LIB_PATH", str(tmp_path / "lib"))
    kernels.openmp.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="nsample.cpu.kernels"):
            cflags, ldflags = kernels.flags("neon")
    finally:
        kernels.openmp.cache_clear()
    lib = tmp_path / "lib"
    assert (cflags[:3], ldflags) == ((["-O3", "-Xpreprocessor", "-fopenmp"], ["-lomp", f"-Wl,-rpath,{lib}"]) if ships
                                     else (["-O3", "-ffp-contract=off", "-DCPU_CAPABILITY=DEFAULT"], []))
    assert ("one thread" in caplog.text) != ships


def test_elsewhere_openmp_is_fopenmp_and_clang_links_it_too(monkeypatch):
    """GCC resolves OpenMP's calls from the libgomp torch has loaded; clang's code calls LLVM's runtime, linked."""
    for compiler, link in (("g++", []), ("clang++", ["-fopenmp"]), ("env clang++", ["-fopenmp"])):
        monkeypatch.setenv("CXX", compiler)
        assert kernels.flags("avx2")[0][:3] == ["-O3", "-fopenmp", "-ffp-contract=off"]
        assert kernels.flags("avx2")[1] == link
