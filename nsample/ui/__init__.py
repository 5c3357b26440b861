"""The nsample web page (Gradio): a thin client of the engine and of nsample.analysis."""
from nsample.ui.blocks import build_blocks
from nsample.ui.mount import build_app

__all__ = ["build_app", "build_blocks"]
