import pytest
from engine_device import load, make_tiny_engine

from nsample.cpu import kernels
from nsample.engine import Engine


@pytest.fixture(scope="session")
def tiny_engine() -> Engine:
    """A tiny random Llama with SmolLM2's real tokenizer, shared by the fast tests."""
    engine = make_tiny_engine()
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def smol_engine() -> Engine:
    """The embedded SmolLM2-135M-Instruct (converted once to a safetensors cache)."""
    engine = load()
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def kernel_ops():
    """nsample's C++ kernels for this machine's instruction set (built once), or the test is skipped."""
    ops = kernels.ops()
    if ops is None:
        pytest.skip(f"nsample's C++ kernels are not available here (instruction set {kernels.isa()})")
    return ops
