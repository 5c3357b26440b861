"""Where the engine tests run: on the CPU in float32 (CI), or where NSAMPLE_TEST_DEVICE, NSAMPLE_TEST_DTYPE and
NSAMPLE_TEST_DECODE_WIDTH say (scripts/cuda_check.sh runs the engine tests on cuda in bfloat16, with and without a
decode width), asserting the same contract there."""
import os

import torch

from nsample import EngineConfig
from nsample.engine import Engine
from nsample.models.tiny_model import tiny_model

DEVICE = os.environ.get("NSAMPLE_TEST_DEVICE", "cpu")
DTYPE = os.environ.get("NSAMPLE_TEST_DTYPE", "float32")
DECODE_WIDTH = int(os.environ.get("NSAMPLE_TEST_DECODE_WIDTH") or 0) or None
KV_SCALE = getattr(torch, DTYPE).itemsize / 4  # the KV cache's bytes per token against float32's


def config(**fields) -> EngineConfig:
    """EngineConfig(**fields), at the test decode width unless `fields` sets one."""
    return EngineConfig(**({"decode_width": DECODE_WIDTH} | fields))


def make_tiny_engine(**fields) -> Engine:
    """A private tiny engine (the tiny model's weights from seed 0) on the test device."""
    model, tok = tiny_model()
    return Engine(model.to(device=DEVICE, dtype=getattr(torch, DTYPE)), tok, config(**fields),
                  name="nsample/tiny-random")


def load(model: str | None = None, **fields) -> Engine:
    """nsample.load(model) on the test device."""
    import nsample

    return nsample.load(model, device=DEVICE, dtype=DTYPE, **({"decode_width": DECODE_WIDTH} | fields))
