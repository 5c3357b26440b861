"""The code passes the project's lint rules ([tool.ruff.lint] in pyproject.toml: pycodestyle, pyflakes, import
order, 120 columns), so a maintainer's `ruff check` starts clean."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_passes():
    paths = ["nsample", "tests", "scripts", "app.py"]
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *paths], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
