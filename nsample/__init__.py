"""nsample: the OpenAI `n` parameter made real — one prompt, n independently seeded choices, computed together."""
from nsample.config import EngineConfig
from nsample.engine import Engine, load
from nsample.errors import InvalidRequest, NSampleError
from nsample.outputs import Choice, GenerationResult, StreamEvent, TokenLogprob, Usage
from nsample.sampling_params import SamplingParams

__all__ = ["Choice", "Engine", "EngineConfig", "GenerationResult", "InvalidRequest", "NSampleError",
           "SamplingParams", "StreamEvent", "TokenLogprob", "Usage", "load"]
__version__ = "0.1.0"
