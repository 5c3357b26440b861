"""app.py, the entry point: its options and environment variables, and `python app.py` serving both halves."""
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from live_server import free_port, stop_process

ROOT = Path(__file__).resolve().parents[1]
ENV_NAMES = ("NSAMPLE_MODEL", "PORT", "GRADIO_SERVER_PORT", "GRADIO_SERVER_NAME", "SYSTEM", "NSAMPLE_API_KEY")


@pytest.fixture
def app_module(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    spec = importlib.util.spec_from_file_location("nsample_app_entry", ROOT / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_local_defaults(app_module):
    args = app_module.parse_args([])
    assert (args.model, args.host, args.port, args.device, args.api_key) == (None, "127.0.0.1", 7860, "auto", None)


def test_environment_and_flags(app_module, monkeypatch):
    monkeypatch.setenv("NSAMPLE_MODEL", "nsample/tiny-random")
    monkeypatch.setenv("PORT", "9001")
    args = app_module.parse_args([])
    assert (args.model, args.port) == ("nsample/tiny-random", 9001)
    args = app_module.parse_args(["--model", "some/model", "--port", "9002", "--host", "0.0.0.0"])
    assert (args.model, args.port, args.host) == ("some/model", 9002, "0.0.0.0")


def test_spaces_defaults(app_module, monkeypatch):
    monkeypatch.setenv("SYSTEM", "spaces")
    args = app_module.parse_args([])
    assert (args.model, args.host) == ("HuggingFaceTB/SmolLM2-135M-Instruct", "0.0.0.0")
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.2")
    monkeypatch.setenv("NSAMPLE_MODEL", "nsample/tiny-random")
    assert (app_module.parse_args([]).host, app_module.parse_args([]).model) == ("127.0.0.2", "nsample/tiny-random")


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
