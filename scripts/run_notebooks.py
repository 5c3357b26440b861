"""Execute every notebook in notebooks/ on a kernel running this Python; fail on the first cell error.

    python scripts/run_notebooks.py            # execute only; the stored notebooks stay as they are
    python scripts/run_notebooks.py --write    # store the fresh outputs in the notebooks
    python scripts/run_notebooks.py --strip    # remove stored outputs (how notebooks are committed)
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
KERNEL = "nsample-python"


def notebook_paths(folder: Path = NOTEBOOKS) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def kernel_env() -> dict[str, str]:
    """This environment, with the repository importable and plotly figures stored as JSON, not as plotly.js."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "PLOTLY_RENDERER": "plotly_mimetype"}


def execute(path: Path, timeout: int = 900) -> nbformat.NotebookNode:
    """The notebook executed top to bottom in its own folder, on a kernel started by sys.executable."""
    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as kernels:
        write_kernel_spec(Path(kernels) / KERNEL)  # argv[0] is sys.executable, whatever kernels are installed
        specs = KernelSpecManager(kernel_dirs=[kernels], ensure_native_kernel=False)
        manager = KernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)
        client = NotebookClient(notebook, km=manager, timeout=timeout,
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute(env=kernel_env())
    return notebook


def strip(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook without outputs or execution counts."""
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
    return notebook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="store the executed outputs in the notebooks")
    mode.add_argument("--strip", action="store_true", help="remove stored outputs without executing")
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: notebooks/*.ipynb)")
    args = parser.parse_args(argv)
    for path in args.notebooks or notebook_paths():
        if args.strip:
            nbformat.write(strip(nbformat.read(path, as_version=4)), path)
            print(f"stripped {path}")
            continue
        start = time.perf_counter()
        executed = execute(path)
        print(f"ok {path} ({time.perf_counter() - start:.0f} s)")
        if args.write:
            nbformat.write(executed, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
