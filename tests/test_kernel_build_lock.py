"""An interrupted first start never hangs the next one (nsample/cpu/build_lock.py), and `nsample build-kernels`.

Each test works in a tmp TORCH_EXTENSIONS_DIR holding a copy of the kernels built once in the real cache (built
there first if they are not yet): torch's load finds a copy up to date (ninja builds nothing), so no test compiles.
"""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from live_server import free_port, stop_process

from nsample.cpu import kernels

pytestmark = pytest.mark.skipif(kernels.isa() is None or bool(os.environ.get("NSAMPLE_NO_CPP")),
                                reason="no C++ kernels on this machine")
ISA = kernels.isa()
BUILD_S = 1200  # a first build in the real cache, once per machine and instruction set
START_S = 120  # the bound on a start that must not hang
HOLD = """import sys, time
from pathlib import Path
from torch.utils.file_baton import FileBaton
from nsample.cpu.build_lock import build_lock
where = Path(sys.argv[1])
with build_lock(where, 0):
    FileBaton(str(where / "lock")).try_acquire()  # as torch's load does around its ninja run
    print("holding", flush=True)
    time.sleep(600)
"""


def cli(*args: str, env: dict, timeout: float = START_S) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "nsample.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    return done, time.monotonic() - start


def env_for(root: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NSAMPLE_KERNEL_WAIT_S"}
    return {**env, "TORCH_EXTENSIONS_DIR": str(root), **extra}


@pytest.fixture(scope="module")
def built() -> dict[str, Path]:
    """ISA -> its build directory in the real cache, brought up to date there first.

    Not just where no library is there yet: one built from another checkout (CI's clean clone in another folder)
    names other source paths, so ninja would rebuild its copy, and a test meant to take seconds would compile.
    """
    isas = list(dict.fromkeys([ISA, *kernels.runnable()]))
    for isa in isas:
        done, _ = cli("build-kernels", "--isa", isa, env=dict(os.environ), timeout=BUILD_S)
        assert done.returncode == 0, done.stderr
    return {isa: kernels.build_directory(isa) for isa in isas}


def copy(built: dict[str, Path], root: Path, isa: str = ISA) -> Path:
    """A copy of `isa`'s built kernels under `root`, mtimes kept (copy2), without either lock file."""
    return Path(shutil.copytree(built[isa], root / built[isa].name, ignore=shutil.ignore_patterns("lock", "*.lock")))


def library(where: Path, isa: str = ISA) -> Path:
    return where / f"nsample_kernels_{isa}.so"


@pytest.fixture
def holder():
    """Start a process holding a build's locks in a copied directory: nsample's flock and torch's lock file."""
    procs = []

    def start(where: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLD, str(where)], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "holding"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_build_kernels_says_which_and_where_and_reuses_a_built_copy(built, tmp_path):
    where = copy(built, tmp_path)
    before = library(where).stat().st_mtime_ns
    done, took = cli("build-kernels", env=env_for(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"nsample: C++ kernels for {ISA} at {library(where)}\n"
    assert "building" not in done.stderr and library(where).stat().st_mtime_ns == before  # reused, not relinked
    assert took < 30, took  # torch's import, ninja finding nothing to do: seconds, where a build takes minutes


def test_build_kernels_all_covers_every_instruction_set_this_cpu_runs(built, tmp_path):
    wheres = [copy(built, tmp_path, isa) for isa in kernels.runnable()]
    done, _ = cli("build-kernels", "--isa", "all", env=env_for(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"nsample: C++ kernels for {isa} at {library(where, isa)}"
                                        for isa, where in zip(kernels.runnable(), wheres)]


@pytest.mark.parametrize("isa, code, why", [("sse", 2, "--isa must be auto, all or one of"),
                                            ("neon" if ISA != "neon" else "avx2", 1, "this CPU does not run")])
def test_build_kernels_refuses_what_it_cannot_build(tmp_path, isa, code, why):
    done, _ = cli("build-kernels", "--isa", isa, env=env_for(tmp_path))
    assert done.returncode == code and why in done.stderr and done.stdout == ""


def test_build_kernels_fails_with_the_compilers_reason(tmp_path):
    done, took = cli("build-kernels", env=env_for(tmp_path, CXX=str(tmp_path / "no-such-g++")))
    assert done.returncode == 1 and f"the C++ kernels for {ISA} cannot be built here" in done.stderr, done.stderr
    assert "no-such-g++" in done.stderr and took < START_S


def test_a_stale_torch_lock_is_removed_and_the_built_kernels_load(built, tmp_path):
    where = copy(built, tmp_path)
    (where / "lock").touch()  # what a build stopped midway leaves: torch waits on it forever
    before = library(where).stat().st_mtime_ns
    done, took = cli("build-kernels", env=env_for(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"removing {where / 'lock'}: a stale lock" in done.stderr
    assert not (where / "lock").exists() and library(where).stat().st_mtime_ns == before and took < START_S


def test_a_build_killed_midway_does_not_hang_the_next_server_start(built, tmp_path, holder):
    where = copy(built, tmp_path)
    killed = holder(where)
    killed.send_signal(signal.SIGKILL)  # its flock goes with it; torch's lock file stays
    killed.wait()
    assert (where / "lock").exists()
    log = serve_until_healthy(tmp_path, env_for(tmp_path))
    assert "a stale lock" in log and "using ATen ops" not in log, log


def test_a_process_left_working_in_the_directory_is_waited_for_before_the_lock_is_removed(built, tmp_path):
    where = copy(built, tmp_path)
    (where / "lock").touch()
    orphan = subprocess.Popen(["sleep", "600"], cwd=where)  # as a ninja outliving its killed parent
    try:
        done, took = cli("build-kernels", env=env_for(tmp_path, NSAMPLE_KERNEL_WAIT_S="2"))
    finally:
        orphan.kill()
        orphan.wait()
    assert done.returncode == 1, done.stderr
    assert f"left processes [{orphan.pid}] running there; waiting for them up to 2 s" in done.stderr
    assert f"processes [{orphan.pid}] were still working in {where} after 2 s" in done.stderr
    assert (where / "lock").exists() and 2 <= took < START_S
    done, _ = cli("build-kernels", env=env_for(tmp_path))  # the orphan gone, the lock is stale
    assert done.returncode == 0 and "a stale lock" in done.stderr and not (where / "lock").exists(), done.stderr


def test_a_live_build_elsewhere_is_waited_for_a_bounded_time_then_the_engine_runs_on_aten(built, tmp_path, holder):
    where = copy(built, tmp_path)
    live = holder(where)
    env = env_for(tmp_path, NSAMPLE_KERNEL_WAIT_S="3")
    done, took = cli("build-kernels", env=env)
    assert done.returncode == 1 and f"(pid {live.pid}) was still building them in {where} after 3 s" in done.stderr
    assert 3 <= took < START_S
    log = serve_until_healthy(tmp_path, env)
    assert f"another process (pid {live.pid}) is building nsample's C++ kernels in {where}; waiting for it up to " \
           "3 s (NSAMPLE_KERNEL_WAIT_S)" in log, log
    assert f"nsample's C++ kernels are not available for {ISA}" in log and "using ATen ops" in log, log
    assert live.poll() is None and (where / "lock").exists()  # the live build's lock is its own: left alone


def serve_until_healthy(root: Path, env: dict) -> str:
    """Start `nsample serve` (the embedded GGUF) on a free port; its log, once /health answers and one short
    completion is served within START_S. The server is stopped either way."""
    port, log_path = free_port(), root / "serve.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nsample.cli", "serve", "--host", "127.0.0.1", "--port",
                                 str(port)], env=env, stderr=log, stdout=log, text=True)
    try:
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + START_S
        while not healthy(url):
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, f"no /health within {START_S} s:\n{log_path.read_text()}"
            time.sleep(0.5)
        model = httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["id"]
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "n": 2}
        r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)
        assert r.status_code == 200 and len(r.json()["choices"]) == 2, r.text
    finally:
        stop_process(proc)
    return log_path.read_text()


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).json().get("status") == "ok"
    except (httpx.HTTPError, ValueError):
        return False
