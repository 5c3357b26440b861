"""Remote engine configuration: one dataclass; the --upstream… options and $NSAMPLE_UPSTREAM… derive from it."""
from dataclasses import dataclass

from nsample.options import option

MODES = ("auto", "native", "fanout")


@dataclass(frozen=True)
class RemoteConfig:
    """Serve an OpenAI-compatible upstream server's model instead of a local one."""

    url: str = option(help="an OpenAI-compatible server's base URL, e.g. http://host:8000/v1 (vLLM, SGLang, "
                           "llama.cpp, Ollama, TGI, another nsample)", name="upstream")
    api_key: str | None = option(None, "API key sent to the upstream as a Bearer token")
    model: str | None = option(None, "the upstream's model name (default: the first one its /v1/models lists)")
    mode: str = option("auto", "how n choices are made: native = pass n through in one request, fanout = n "
                               "single-choice requests with seeds seed+i, auto = probe the upstream once (and go one "
                               "request at a time if it cuts streams short)", choices=MODES)
    timeout: float = option(600.0, "seconds to wait for each upstream response (or streamed chunk)")
    connect_timeout: float = option(10.0, "seconds to wait for a connection to the upstream")
    concurrency: int = option(16, "upstream requests at once for one nsample request (fan-out)")
    max_connections: int = option(256, "pooled connections to the upstream, over all requests")

    def __post_init__(self):
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"the upstream URL must start with http:// or https://, got {self.url!r}")
        url = self.url.rstrip("/")
        object.__setattr__(self, "url", url if url.count("/") > 2 else url + "/v1")  # bare host: add /v1
        if self.mode not in MODES:
            raise ValueError(f"the upstream mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.timeout <= 0 or self.connect_timeout <= 0:
            raise ValueError("upstream timeouts must be positive")
        if self.concurrency < 1 or self.max_connections < 1:
            raise ValueError("upstream concurrency and max_connections must be at least 1")
