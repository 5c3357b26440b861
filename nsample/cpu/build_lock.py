"""One kernel build at a time in a build directory, and never a start that hangs on a build that was stopped.

torch's cpp_extension serializes builds with a `lock` file it creates (O_EXCL) and removes when it is done. A process
stopped mid-build (SIGTERM, SIGKILL, a supervisor's timeout) leaves that file behind, it names no owner, and every
later load of the extension waits for it to go away: forever. So nsample holds a lock of its own around torch's: an
flock(2) on `nsample-build.lock` in the same directory, which the OS releases when its holder dies, however it dies.
Whoever holds it knows that no nsample build runs there, so a torch `lock` it finds is stale and is removed; unless
a process still works in that directory (on Linux, seen in /proc: a ninja orphaned by its killed parent), which is
waited for like a live build.

A live build in another process is waited for at most NSAMPLE_KERNEL_WAIT_S seconds (default 600: a first build
takes a few minutes on two busy cores); past that, `BuildBusy` says why and the caller runs without the kernels.
"""
import contextlib
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; the kernels do not build there, and torch's own lock still serializes
    fcntl = None

log = logging.getLogger(__name__)
OURS = "nsample-build.lock"  # the flock; it also holds its owner's pid, for the waiting line
TORCH = "lock"  # torch's FileBaton in the build directory (torch.utils.cpp_extension._jit_compile)
DEFAULT_WAIT_S = 600.0
POLL_S = 0.25


class BuildBusy(TimeoutError):
    """Another process still builds the kernels in this directory after the bounded wait."""


def wait_s() -> float:
    """NSAMPLE_KERNEL_WAIT_S: how long a start waits for another process's build (0: not at all)."""
    raw = os.environ.get("NSAMPLE_KERNEL_WAIT_S", "")
    try:
        value = float(raw) if raw else DEFAULT_WAIT_S
    except ValueError:
        raise ValueError(f"NSAMPLE_KERNEL_WAIT_S must be a number of seconds; got {raw!r}") from None
    return max(value, 0.0)


@contextlib.contextmanager
def build_lock(where: Path, wait: float) -> Iterator[None]:
    """Hold `where`'s build lock for the body (torch's load or build), with torch's lock cleared if it is stale."""
    fd = os.open(where / OURS, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        _acquire(fd, where, wait, deadline)
        _clear_stale(where, wait, deadline)
        yield
    finally:
        os.close(fd)  # releases the flock; the pid in the file is left, it means nothing unlocked


def _acquire(fd: int, where: Path, wait: float, deadline: float) -> None:
    if not _try_lock(fd):
        owner = _owner(where)
        log.warning("another process%s is building nsample's C++ kernels in %s; waiting for it up to %g s "
                    "(NSAMPLE_KERNEL_WAIT_S)", f" (pid {owner})" if owner else "", where, wait)
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                raise BuildBusy(f"another process{f' (pid {owner})' if owner else ''} was still building them in "
                                f"{where} after {wait:g} s (NSAMPLE_KERNEL_WAIT_S)")
            time.sleep(POLL_S)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _try_lock(fd: int) -> bool:
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _owner(where: Path) -> str:
    try:
        return (where / OURS).read_text().strip()
    except OSError:
        return ""


def _clear_stale(where: Path, wait: float, deadline: float) -> None:
    """Remove torch's lock, left by a build that was stopped, once no process works in `where` any more."""
    stale = where / TORCH
    if not stale.exists():
        return
    workers = _working_in(where)
    if workers:
        log.warning("a kernel build stopped in %s left processes %s running there; waiting for them up to %g s "
                    "(NSAMPLE_KERNEL_WAIT_S)", where, workers, wait)
    while workers:
        if time.monotonic() >= deadline:
            raise BuildBusy(f"processes {workers} were still working in {where} after {wait:g} s")
        time.sleep(POLL_S)
        workers = _working_in(where)
    log.warning("removing %s: a stale lock, left by a kernel build that was stopped (none runs there now)", stale)
    stale.unlink(missing_ok=True)


def _working_in(where: Path) -> list[int]:
    """Other processes whose working directory is `where` (torch runs ninja, and ninja the compiler, there). Linux
    only: elsewhere none are seen, and a stale lock is removed as soon as the flock is held."""
    target, pids = os.path.realpath(where), []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if int(entry.name) != os.getpid() and os.readlink(entry / "cwd") == target:
                pids.append(int(entry.name))
        except (OSError, ValueError):
            continue  # gone, a zombie, or not ours to look at
    return pids
