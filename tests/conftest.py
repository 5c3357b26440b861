import pytest

import nsample
from nsample.engine import Engine
from nsample.models.tiny_model import tiny_model


@pytest.fixture(scope="session")
def tiny_engine() -> Engine:
    """A tiny random Llama with SmolLM2's real tokenizer, shared by the fast tests."""
    model, tokenizer = tiny_model()
    engine = Engine(model, tokenizer, name="nsample/tiny-random")
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def smol_engine() -> Engine:
    """The embedded SmolLM2-135M-Instruct (converted once to a safetensors cache)."""
    engine = nsample.load()
    yield engine
    engine.close()
