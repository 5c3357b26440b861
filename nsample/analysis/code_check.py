"""Code checks: Python source defining check(text) -> bool, run per choice in a fresh, limited subprocess.

This is the only place nsample runs Python source text. Each choice gets its own `python -I` process with an
address-space limit (RLIMIT_AS), a CPU-time limit, a cap on file sizes and no core dumps, in an empty
temporary working directory, and is killed (with anything it started) at its wall-clock limit. These limits
stop runaway checks; they are not a security sandbox: the source runs as this user, with file and network
access, so run only checks you would run yourself. POSIX only (the limits need the resource module).
"""
import ast
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from nsample.analysis.checks import Verdict

OUTPUT_LIMIT = 1 << 20  # bytes a check may write to any file, its stdout and stderr included
MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc")

# The child: set the limits, run the source, call check(text), write one JSON verdict as its last stdout line.
CHILD = r"""
import json, resource, sys
request = json.load(sys.stdin)
report = sys.stdout
sys.stdout = sys.stderr  # what the check prints cannot garble the verdict
def verdict(result, detail=""):
    report.write("\n" + json.dumps({"result": result, "detail": detail}) + "\n")
    report.flush()
def limit(kind, value):  # soft and hard, so the check cannot raise it again; never above an inherited limit
    hard = resource.getrlimit(kind)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))
try:
    limit(resource.RLIMIT_AS, request["memory_bytes"])
    limit(resource.RLIMIT_CPU, request["cpu_s"])
    limit(resource.RLIMIT_FSIZE, request["output_bytes"])
    limit(resource.RLIMIT_CORE, 0)
except (ValueError, OSError) as error:
    verdict("error", f"could not set the check's resource limits, so it did not run: {error}")
    sys.exit(0)
reserve = bytearray(1 << 20)  # freed to report a MemoryError
try:
    namespace = {"__name__": "__check__"}
    exec(compile(request["source"], "<check>", "exec"), namespace)
    outcome = namespace["check"](request["text"])
    if type(outcome).__name__ in ("bool", "bool_"):
        verdict("pass" if outcome else "fail", "" if outcome else "check returned False")
    else:
        verdict("error", f"check returned {outcome!r:.200}, not True or False")
except MemoryError:
    del reserve
    verdict("error", f"memory: the check exceeded its {request['memory_bytes'] >> 20} MB memory limit")
except BaseException as error:
    verdict("error", f"{type(error).__name__}: {error}"[:2000])
"""


@dataclass(frozen=True)
class CodeCheck:
    """A check from Python source defining check(text) -> bool, each choice in its own limited subprocess.

    True passes, False fails; an exception, a non-bool result, a timeout (`timeout_s` wall clock) or running
    out of memory (`memory_mb` of address space) is "error" with the reason in detail. `workers` bounds how many
    run at once (default: min(n, CPU count)). Source that does not parse or define check is a ValueError.
    """

    source: str
    timeout_s: float = 5.0
    memory_mb: int = 512
    workers: int | None = None

    def __post_init__(self):
        if self.timeout_s <= 0 or self.memory_mb <= 0:
            raise ValueError(f"timeout_s and memory_mb must be positive, got {self.timeout_s} and {self.memory_mb}")
        if not defines_check(self.source):
            raise ValueError("the code check's source must define a top-level function check(text) -> bool")

    @property
    def name(self) -> str:
        return f"code check ({self.timeout_s:g} s, {self.memory_mb} MB)"

    def verdict(self, text: str) -> Verdict:
        return run_code_check(self.source, text, self.timeout_s, self.memory_mb)

    def verdicts(self, texts: Sequence[str]) -> list[Verdict]:
        """All texts checked, at most `workers` subprocesses at a time; in the texts' order."""
        if not texts:
            return []
        workers = min(len(texts), self.workers or os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="code-check") as pool:
            return list(pool.map(self.verdict, texts))

    def __call__(self, text: str) -> bool:
        """Whether the text passes; an "error" verdict is raised as RuntimeError."""
        verdict = self.verdict(text)
        if verdict.result == "error":
            raise RuntimeError(verdict.detail)
        return verdict.result == "pass"


def defines_check(source: str) -> bool:
    """Whether the source parses and binds `check` at top level (a def, an assignment or an import)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ValueError(f"the code check's source does not parse: {error}") from None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "check":
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "check" for t in node.targets):
            return True
        if isinstance(node, ast.Import | ast.ImportFrom) and any((a.asname or a.name) == "check" for a in node.names):
            return True
    return False


def run_code_check(source: str, text: str, timeout_s: float, memory_mb: int) -> Verdict:
    """One text checked in a fresh `python -I` subprocess under the limits; the verdict, never an exception."""
    request = {"source": source, "text": text, "memory_bytes": memory_mb << 20, "cpu_s": math.ceil(timeout_s) + 1,
               "output_bytes": OUTPUT_LIMIT}
    with tempfile.TemporaryDirectory(prefix="nsample-check-") as folder:
        folder = Path(folder)
        (folder / "request.json").write_text(json.dumps(request))
        with open(folder / "request.json") as stdin, open(folder / "out", "w+") as out, \
                open(folder / "err", "w+") as err:
            process = subprocess.Popen([sys.executable, "-I", "-c", CHILD], stdin=stdin, stdout=out, stderr=err,
                                       cwd=folder, env=_child_env(), start_new_session=True)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return Verdict("error", f"timeout: the check ran past its {timeout_s:g} s limit and was stopped")
            finally:
                _kill_group(process)
            out.seek(0)
            err.seek(0)
            return _verdict_from(out.read(OUTPUT_LIMIT), err.read(OUTPUT_LIMIT), process.returncode, memory_mb)


def _verdict_from(stdout: str, stderr: str, returncode: int, memory_mb: int) -> Verdict:
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        reported = json.loads(lines[-1]) if lines else None
    except ValueError:
        reported = None
    if isinstance(reported, dict) and reported.get("result") in ("pass", "fail", "error"):
        return Verdict(reported["result"], str(reported.get("detail", "")))
    if returncode == -signal.SIGXCPU:
        return Verdict("error", "timeout: the check used up its CPU time limit and was stopped")
    if any(marker in stderr for marker in MEMORY_MARKERS):
        return Verdict("error", f"memory: the check exceeded its {memory_mb} MB memory limit")
    tail = stderr.strip().splitlines()[-1:] or ["no output"]
    return Verdict("error", f"the check process exited with status {returncode} without a verdict: {tail[0][:500]}")


def _kill_group(process: subprocess.Popen) -> None:
    """Stop the check and anything it started (it leads its own session), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _child_env() -> dict[str, str]:
    """A small environment: -I ignores PYTHON* variables; one thread per numeric library keeps memory modest."""
    keep = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR") if name in os.environ}
    return {**keep, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
