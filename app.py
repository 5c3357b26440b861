"""nsample's one server: the page at / and the OpenAI API at /v1, one process, one engine, one port.

    python app.py                          # embedded SmolLM2-135M-Instruct on http://127.0.0.1:7860
    python app.py --model nsample/tiny-random --port 8080
    NSAMPLE_MODEL=HuggingFaceTB/SmolLM2-135M-Instruct PORT=7860 python app.py

Also the Hugging Face Space entry point: there SYSTEM=spaces, so it listens on 0.0.0.0 and, unless NSAMPLE_MODEL
says otherwise, loads SmolLM2-135M-Instruct from the hub. The GPU is used when there is one (device "auto").
"""
import argparse
import os

import uvicorn

import nsample
from nsample.config import EngineConfig
from nsample.remote import RemoteEngine
from nsample.remote import config as remote_config
from nsample.server.config import ServerConfig
from nsample.ui import build_app

SPACES_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the embedded model's hub twin (the GGUF package is local)
DEFAULT_PORT = 7860  # Gradio's and Hugging Face Spaces' port


def on_spaces() -> bool:
    return os.environ.get("SYSTEM") == "spaces"


def parse_args(argv=None) -> argparse.Namespace:
    env = os.environ
    engine, server = EngineConfig(), ServerConfig()
    p = argparse.ArgumentParser(description="The nsample page and OpenAI API on one port.")
    p.add_argument("--model", default=env.get("NSAMPLE_MODEL") or (SPACES_MODEL if on_spaces() else engine.model),
                   help="hub id, folder, .gguf, or nsample/tiny-random (env NSAMPLE_MODEL; default: the embedded "
                        "SmolLM2-135M-Instruct, or its hub id on Spaces)")
    p.add_argument("--host", default=env.get("GRADIO_SERVER_NAME") or ("0.0.0.0" if on_spaces() else server.host),
                   help="interface to listen on (env GRADIO_SERVER_NAME; default 127.0.0.1, 0.0.0.0 on Spaces)")
    p.add_argument("--port", type=int, default=int(env.get("PORT") or env.get("GRADIO_SERVER_PORT") or DEFAULT_PORT),
                   help=f"TCP port (env PORT or GRADIO_SERVER_PORT; default {DEFAULT_PORT})")
    p.add_argument("--device", default=env.get("NSAMPLE_DEVICE") or engine.device, help="auto, cpu, cuda, mps")
    p.add_argument("--dtype", default=env.get("NSAMPLE_DTYPE") or engine.dtype, help="auto, float32, bfloat16, ...")
    p.add_argument("--api-key", default=env.get("NSAMPLE_API_KEY") or server.api_key,
                   help="require this bearer key on /v1 (env NSAMPLE_API_KEY; default: open)")
    remote_config.add_arguments(p)  # --upstream URL (env NSAMPLE_UPSTREAM) …: an OpenAI-compatible server's model
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    remote = remote_config.pop_options(vars(args))
    engine = RemoteEngine(remote) if remote else nsample.load(args.model, device=args.device, dtype=args.dtype)
    config = ServerConfig(host=args.host, port=args.port, api_key=args.api_key)
    app = build_app(engine, config)
    print(f"nsample: {engine.name} on {engine.device}; page http://{args.host}:{args.port}/ , "
          f"OpenAI API http://{args.host}:{args.port}/v1", flush=True)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=config.log_level)
    finally:
        engine.close()


if __name__ == "__main__":
    main()
