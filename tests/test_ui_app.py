"""app.py, the entry point: `python app.py` serves both halves; the Space's requirements (options: test_options.py)."""
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from live_server import free_port, stop_process

ROOT = Path(__file__).resolve().parents[1]
ENV_NAMES = ("NSAMPLE_MODEL", "PORT", "GRADIO_SERVER_PORT", "GRADIO_SERVER_NAME", "SYSTEM", "NSAMPLE_API_KEY")


def test_python_app_py_serves_page_and_api(tmp_path):
    port, log = free_port(), tmp_path / "app.log"
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "app.py", "--model", "nsample/tiny-random", "--port", str(port)],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "app.py did not start in time"
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        assert "<html" in httpx.get(base + "/", timeout=30).text.lower()
        assert httpx.get(base + "/v1/models", timeout=30).json()["data"][0]["id"] == "nsample/tiny-random"
        done = httpx.post(base + "/v1/completions", timeout=60,
                          json={"model": "nsample/tiny-random", "prompt": "Hi", "n": 3, "max_tokens": 4}).json()
        assert [c["index"] for c in done["choices"]] == [0, 1, 2]
    finally:
        stop_process(proc)


def test_space_requirements_mirror_pyproject():
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    listed = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert sorted(listed) == sorted(d for d in declared if not d.startswith("gradio"))
