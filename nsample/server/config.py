"""Server configuration: one dataclass; `nsample serve` derives its options from it (defaults live here only)."""
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"  # interface to listen on; 0.0.0.0 exposes the server to the network
    port: int = 8000  # TCP port
    api_key: str | None = None  # require "Authorization: Bearer <key>" on /v1/*; None = open (local use)
    max_body_bytes: int = 4 * 2**20  # larger request bodies are refused with 413
    retry_after_s: int = 1  # Retry-After sent with 429 when the engine's queue is full
    log_level: str = "info"  # uvicorn log level
