"""The `nsample` command. `nsample serve` loads a model and serves the OpenAI-compatible API.

Its options are derived from the fields of EngineConfig and ServerConfig (name, type, default and the field's
comment as help), so each default and each description is written once, in the dataclass.
"""
import argparse
import dataclasses
import inspect
import os
import re
import sys
import typing

from nsample.config import EngineConfig
from nsample.remote import config as remote_config
from nsample.server.config import ServerConfig

API_KEY_ENV = "NSAMPLE_API_KEY"  # read when --api-key is not given (keeps the key out of the process list)


def field_notes(cls) -> dict[str, str]:
    """Each field's trailing `# comment` in the dataclass source: the one place its meaning is written."""
    return dict(re.findall(r"^\s+(\w+):[^#\n]*#\s*(.+)$", inspect.getsource(cls), re.MULTILINE))


def add_dataclass_options(parser: argparse.ArgumentParser, cls) -> None:
    """One --option per field; unset options stay out of the namespace, so the dataclass default applies."""
    group, notes, hints = parser.add_argument_group(cls.__name__), field_notes(cls), typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind = next((a for a in typing.get_args(hints[f.name]) if a is not type(None)), hints[f.name])
        flag, text = "--" + f.name.replace("_", "-"), f"{notes.get(f.name, '')} (default: {f.default})"
        text = text.replace("%", "%%")
        if kind is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=text)
        else:
            group.add_argument(flag, type=kind, default=argparse.SUPPRESS, help=text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nsample", description="n independently seeded choices, computed together.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve the OpenAI-compatible API (/v1/chat/completions, ...)",
                                description=f"Serve the OpenAI-compatible API. The API key may also come from "
                                            f"${API_KEY_ENV}.")
    add_dataclass_options(serve, EngineConfig)
    add_dataclass_options(serve, ServerConfig)
    remote_config.add_arguments(serve)  # --upstream URL …: serve an OpenAI-compatible server instead of a local model
    return parser


def split_options(options: dict) -> tuple[EngineConfig, ServerConfig]:
    names = {f.name for f in dataclasses.fields(EngineConfig)}
    server = {k: v for k, v in options.items() if k in {f.name for f in dataclasses.fields(ServerConfig)}}
    if "api_key" not in server and os.environ.get(API_KEY_ENV):
        server["api_key"] = os.environ[API_KEY_ENV]
    return EngineConfig(**{k: v for k, v in options.items() if k in names}), ServerConfig(**server)


def serve(engine_config: EngineConfig, config: ServerConfig, remote: remote_config.RemoteConfig | None = None
          ) -> None:
    import uvicorn

    import nsample
    from nsample.server import create_app

    if remote is not None:
        from nsample.remote import RemoteEngine

        engine = RemoteEngine(remote, engine_config)
    else:
        engine = nsample.load(**dataclasses.asdict(engine_config))
    try:
        print(f"nsample: serving {engine.name!r} at http://{config.host}:{config.port}/v1"
              f"{' (API key required)' if config.api_key else ''}", file=sys.stderr)
        uvicorn.run(create_app(engine, config), host=config.host, port=config.port, log_level=config.log_level)
    finally:
        engine.close()


def main(argv: list[str] | None = None) -> None:
    from nsample.errors import NSampleError

    parser = build_parser()
    options = vars(parser.parse_args(argv))
    if options.pop("command") != "serve":
        parser.print_help()
        parser.exit(2)
    try:
        remote = remote_config.pop_options(options)
        serve(*split_options(options), remote)
    except NSampleError as e:
        parser.exit(1, f"nsample: {e.message}\n")


if __name__ == "__main__":
    main()
