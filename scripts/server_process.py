"""The server a reliability script talks to: one already running (--url), or `nsample serve` started for the run.

Shared by scripts/loadtest.py, soak.py, fuzz.py and abuse.py:
    --url http://127.0.0.1:8000 [--pid PID]          a running server (PID: to read its memory)
    --model nsample/tiny-random [--serve-arg=--max-n=8 ...]  start one on a free loopback port, stop it after
"""
import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Target:
    url: str  # base URL, without /v1
    pid: int | None  # the server's process id, when known

    def rss_mib(self) -> float | None:
        """Resident memory of the server process now."""
        if self.pid is None:
            return None
        with open(f"/proc/{self.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024

    def load(self) -> dict:
        """The engine's load from /health: {"waiting": …, "active": …}."""
        health = httpx.get(self.url + "/health", timeout=10).json()
        return {"waiting": health.get("waiting"), "active": health.get("active")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("server", "a running server (--url), or one started for this run (--model)")
    group.add_argument("--url", help="base URL of a running nsample server (default: start one)")
    group.add_argument("--pid", type=int, help="that server's process id, to read its memory")
    group.add_argument("--model", default="nsample/tiny-random",
                       help="model of the server started for the run ('embedded': the embedded SmolLM2)")
    group.add_argument("--serve-arg", action="append", default=[],
                       help="extra `nsample serve` option for that server, e.g. --serve-arg=--max-n=8")
    group.add_argument("--api-key", default=os.environ.get("NSAMPLE_API_KEY"), help="bearer key for /v1")


@contextlib.contextmanager
def target(args: argparse.Namespace, extra: dict[str, str] | None = None):
    """Yield the Target; a server this started (with `extra` in its environment) is stopped on exit."""
    if args.url:
        yield Target(args.url.rstrip("/").removesuffix("/v1"), args.pid)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSAMPLE_") or k == "NSAMPLE_CACHE_DIR"}
    env |= extra or {}
    model = [] if args.model == "embedded" else ["--model", args.model]
    cmd = [sys.executable, "-m", "nsample.cli", "serve", *model, "--port", str(port), "--log-level", "warning",
           *args.serve_arg]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env | ({"NSAMPLE_API_KEY": args.api_key} if args.api_key else {}))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with {proc.returncode}")
            if time.monotonic() > deadline:
                raise SystemExit("the server did not start in 300 s")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        yield Target(url, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
