"""The OpenAI-compatible HTTP API: `create_app(engine, ServerConfig(...))` gives a FastAPI app."""
from nsample.server.api import create_app
from nsample.server.config import ServerConfig

__all__ = ["ServerConfig", "create_app"]
