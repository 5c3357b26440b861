"""Running a script of scripts/ from a test: in a subprocess, with a JSON report read back."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_script(name: str, tmp_path: Path, *args: str, timeout: float = 600) -> tuple[int, dict, str]:
    """(exit status, the --json report, the output) of `python scripts/<name> ... --json FILE`."""
    report = tmp_path / f"{Path(name).stem}.json"
    done = subprocess.run([sys.executable, f"scripts/{name}", *args, "--json", str(report)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    return done.returncode, json.loads(report.read_text()) if report.exists() else {}, output
