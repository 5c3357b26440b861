"""nsample's one server: the page at / and the OpenAI API at /v1, one process, one engine, one port.

    python app.py                          # embedded SmolLM2-135M-Instruct on http://127.0.0.1:7860
    python app.py --model nsample/tiny-random --port 8080
    NSAMPLE_MODEL=HuggingFaceTB/SmolLM2-135M-Instruct PORT=7860 python app.py
    python app.py --help                   # every option: the same set as `nsample serve`

Also the Hugging Face Space entry point: there SYSTEM=spaces, so it listens on 0.0.0.0 and, unless NSAMPLE_MODEL
says otherwise, loads SmolLM2-135M-Instruct from the hub. The GPU is used when there is one (device "auto").
"""
import argparse
import dataclasses
import os

import uvicorn

import nsample
from nsample.cli import Configs, PageConfig, add_serve_options, configs
from nsample.options import values
from nsample.remote import RemoteEngine
from nsample.server.connections import uvicorn_options
from nsample.ui import build_app

SPACES_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the embedded model's hub twin (the GGUF package is local)
DEFAULT_PORT = 7860  # Gradio's and Hugging Face Spaces' port
ENV_ALIASES = {"port": ("PORT", "GRADIO_SERVER_PORT"), "host": ("GRADIO_SERVER_NAME",)}  # Spaces' and Gradio's names


def on_spaces() -> bool:
    return os.environ.get("SYSTEM") == "spaces"


def app_defaults() -> dict:
    """Where the page's defaults differ from `nsample serve`'s: Gradio's port; on Spaces, all interfaces and the hub."""
    return {"port": DEFAULT_PORT} | ({"host": "0.0.0.0", "model": SPACES_MODEL} if on_spaces() else {})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="The nsample page and OpenAI API on one port. Every option can also "
                                                 "be set by the environment variable named in its help.",
                                     allow_abbrev=False)
    add_serve_options(parser, defaults=app_defaults(), env_aliases=ENV_ALIASES)
    return parser


def parse_args(argv=None) -> Configs:
    parser = build_parser()
    return configs(parser, parser.parse_args(argv))


def page_config(argv=None) -> PageConfig:
    """The page's own options (--allow-code-checks, ...)."""
    return PageConfig(**values(PageConfig, build_parser().parse_args(argv)))


def main(argv=None) -> None:
    engine_config, config, remote = parse_args(argv)
    engine = (RemoteEngine(remote, engine_config) if remote
              else nsample.load(**dataclasses.asdict(engine_config)))
    app = build_app(engine, config, page_config(argv))
    print(f"nsample: {engine.name} on {engine.device}; page http://{config.host}:{config.port}/ , "
          f"OpenAI API http://{config.host}:{config.port}/v1", flush=True)
    try:
        uvicorn.run(app, **uvicorn_options(config))
    finally:
        engine.close()


if __name__ == "__main__":
    main()
