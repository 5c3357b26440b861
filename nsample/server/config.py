"""Server configuration: one dataclass; `nsample serve` and app.py derive their options from its fields."""
from dataclasses import dataclass

from nsample.options import option

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


@dataclass(frozen=True)
class ServerConfig:
    """The HTTP server: where it listens and what it lets in."""

    host: str = option("127.0.0.1", "interface to listen on; 0.0.0.0 exposes the server to the network")
    port: int = option(8000, "TCP port")
    api_key: str | None = option(None, "require 'Authorization: Bearer <key>' on /v1/*; None = open (local use); "
                                       "prefer the environment variable, which keeps the key out of the process list")
    max_body_bytes: int = option(4 * 2**20, "larger request bodies are refused with 413")
    request_timeout_s: float = option(30.0, "seconds a client has to send a request's head (else the connection is "
                                            "closed) and then its body (else 408)")
    retry_after_s: int = option(1, "Retry-After sent with 429 when the engine's queue is full")
    log_level: str = option("info", "uvicorn log level", choices=LOG_LEVELS)
