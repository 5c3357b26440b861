"""One server: the OpenAI API routes first, then the Gradio page mounted last at "/" (a root mount shadows
every route registered after it)."""
import gradio as gr
from fastapi import FastAPI

from nsample.ui.blocks import build_blocks
from nsample.ui.style import CSS


def build_app(engine, server_config=None, page_config=None) -> FastAPI:
    """The FastAPI app serving the OpenAI API at /v1 and the nsample page at /, both on `engine`; `page_config`
    (a PageConfig) holds the page's own options, e.g. whether it may run Python code checks."""
    from nsample.server.api import create_app
    from nsample.server.config import ServerConfig

    config = server_config or ServerConfig()
    app = create_app(engine, config)
    blocks = build_blocks(engine, key_required=config.api_key is not None, page_config=page_config)
    return gr.mount_gradio_app(app, blocks, path="/", css=CSS, theme=gr.themes.Soft(), footer_links=["api"],
                               show_error=True)
