"""nsample: the OpenAI `n` parameter made real — one prompt, n independently seeded choices, computed together.

`Engine` and `load` (the local engine, which needs torch) are imported on first use, so the remote engine, the
server and the analysis library work without torch.
"""
from nsample.config import EngineConfig
from nsample.errors import InvalidRequest, NSampleError
from nsample.outputs import Choice, GenerationResult, StreamEvent, TokenLogprob, Usage
from nsample.sampling_params import SamplingParams

__all__ = ["Choice", "Engine", "EngineConfig", "GenerationResult", "InvalidRequest", "NSampleError",
           "SamplingParams", "StreamEvent", "TokenLogprob", "Usage", "load"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in ("Engine", "load"):
        from nsample import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'nsample' has no attribute {name!r}")
