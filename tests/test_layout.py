"""The package's rooms and what each may import, as their __init__ docstrings say (every import, lazy ones too)."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "nsample"
TOP = {p.stem for p in ROOT.glob("*.py")} - {"__init__", "cli"}  # the public modules; cli is the command
PUBLIC = {"nsample"} | {f"nsample.{name}" for name in TOP}
ALLOWED = {  # folder -> the top-level rooms it may import besides the public modules and itself
    "models": {"cpu"},
    "cpu": set(),
    "engine": {"models", "cpu"},
    "analysis": {"models", "cpu"},
}
EXCEPTIONS = {("cpu/fused_decode.py", "nsample.engine.prefix_attention")}  # the layout of the batch it decodes


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nsample"):
            found |= {node.module} | ({f"{node.module}.{a.name}" for a in node.names} if node.module == "nsample"
                                      else set())
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("nsample")}
    return found


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (ROOT / parts[1]).is_dir() else "public"


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_folder_imports_only_what_its_docstring_allows(folder):
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for module in imports(path):
            name = str(path.relative_to(ROOT))
            if (name, module) in EXCEPTIONS or module in PUBLIC or room(module) in ALLOWED[folder] | {folder}:
                continue
            bad.append(f"{name} imports {module}")
    assert not bad, bad


def test_public_modules_import_no_folder():
    for name in TOP:
        assert all(room(m) == "public" for m in imports(ROOT / f"{name}.py")), name


def test_every_folder_says_what_lives_there():
    for folder in [p for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()]:
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        assert doc and len(doc) > 80, folder.name


def test_no_module_left_at_the_top_but_the_public_ones():
    top = {p.stem for p in ROOT.glob("*.py")}
    assert top == {"__init__", "cli", "config", "errors", "options", "outputs", "request", "sampling_params"}
