"""The README and docs/ stay true: their runnable code runs against the tiny model, the MkDocs site builds strictly
(no broken link, page or anchor), the options table is the one the dataclasses give, every README link resolves."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from live_server import live_server

import nsample
from nsample.engine import Engine
from nsample.models.tiny_model import tiny_model
from nsample.server import ServerConfig, create_app

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- runnable(?P<how>[^>]*)-->\n```python\n(?P<code>.*?)```", re.S)
SERVED = "SmolLM2-135M-Instruct"  # the name the README's client example asks for


def runnable(page: str) -> list[tuple[str, str]]:
    return [(m["how"].strip(), m["code"]) for m in BLOCK.finditer((ROOT / page).read_text())]


@pytest.fixture(scope="module")
def tiny_loader(monkeypatch_module):
    """nsample.load() gives the tiny random model (same tokenizer and chat template as the embedded one)."""
    real = nsample.load

    def load(model=None, **kw):
        return real(model or "nsample/tiny-random", **kw)

    monkeypatch_module.setattr(nsample, "load", load)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def api_url():
    model, tokenizer = tiny_model()
    engine = Engine(model, tokenizer, name=SERVED)
    with live_server(create_app(engine, ServerConfig())) as url:
        yield url
    engine.close()


def test_the_readme_marks_its_examples_runnable():
    kinds = [how for how, _ in runnable("README.md")]
    assert len(kinds) >= 2 and any("live server" in k for k in kinds)


@pytest.mark.parametrize("index", range(len(runnable("README.md"))))
def test_readme_block_runs(index, tiny_loader, api_url, capsys):
    how, code = runnable("README.md")[index]
    if "live server" in how:
        assert "http://127.0.0.1:8000/v1" in code
        code = code.replace("http://127.0.0.1:8000/v1", f"{api_url}/v1")
    scope = {"__name__": "readme"}
    try:
        exec(compile(code, f"README.md block {index}", "exec"), scope)
    finally:
        if isinstance(scope.get("engine"), Engine):
            scope["engine"].close()
    assert capsys.readouterr().out.strip(), "the example printed nothing"


def test_docs_build_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "api" / "index.html").is_file()


def test_options_page_lists_every_option():
    sys.path.insert(0, str(ROOT / "scripts"))
    from options_table import written

    page = (ROOT / "docs" / "options.md").read_text()
    assert page == written(page), "docs/options.md is stale: run python scripts/options_table.py --write"


def test_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert len(links) >= 10
    missing = [link for link in links if not link.startswith("http") and not (ROOT / link).exists()]
    assert not missing, missing


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
