"""Remote engines: nsample in front of an OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, TGI, nsample)."""
from nsample.remote.config import RemoteConfig
from nsample.remote.engine import RemoteEngine, connect
from nsample.remote.errors import UpstreamError

__all__ = ["RemoteConfig", "RemoteEngine", "UpstreamError", "connect"]
