"""Every notebook in notebooks/ runs top to bottom on the embedded model, and is stored without outputs."""
import importlib.util
from pathlib import Path

import nbformat
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "run_notebooks.py"
spec = importlib.util.spec_from_file_location("run_notebooks", SCRIPT)
run_notebooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_notebooks)
NOTEBOOKS = run_notebooks.notebook_paths()


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks in {run_notebooks.NOTEBOOKS}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    stale = [i for i, cell in enumerate(notebook.cells)
             if cell.cell_type == "code" and (cell.outputs or cell.execution_count)]
    assert not stale, f"cells {stale} of {path.name} keep outputs: python scripts/run_notebooks.py --strip"


@pytest.mark.e2e
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(path):
    executed = run_notebooks.execute(path)  # raises CellExecutionError, with the cell's traceback, on failure
    code_cells = [cell for cell in executed.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code_cells)
    assert not [o for cell in code_cells for o in cell.outputs if o.output_type == "error"]
