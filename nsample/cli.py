"""The `nsample` command. `nsample serve` loads a model and serves the OpenAI-compatible API.

Its options come from the fields of EngineConfig, ServerConfig and RemoteConfig (nsample.options): name, type,
default, help and environment variable are written once, in the dataclass. app.py takes the same options.
"""
import argparse
import dataclasses
import sys
from dataclasses import dataclass

from nsample.config import EngineConfig
from nsample.options import add_options, option, values
from nsample.remote.config import RemoteConfig
from nsample.server.config import ServerConfig

Configs = tuple[EngineConfig, ServerConfig, RemoteConfig | None]


@dataclass(frozen=True)
class PageConfig:
    """the page (app.py only; nsample serve serves no page and ignores these)"""

    allow_code_checks: bool = option(False, "let the page's Answers panel run Python code checks (check(text) -> "
                                            "bool) on this server, each choice in a subprocess with a time and a "
                                            "memory limit; off by default, also on a Space")
    code_check_timeout_s: float = option(5.0, "wall-clock seconds a page code check may run per choice")
    code_check_memory_mb: int = option(512, "address space in MB a page code check may use per choice")


def add_serve_options(parser: argparse.ArgumentParser, defaults: dict | None = None,
                      env_aliases: dict | None = None) -> None:
    """Every option of a serving process; `defaults` and `env_aliases` are keyed by option name ("port")."""
    given = {"defaults": defaults, "env_aliases": env_aliases}
    add_options(parser, EngineConfig, title="engine", **given)
    add_options(parser, ServerConfig, title="server", **given)
    add_options(parser, RemoteConfig, prefix="upstream", title="remote engine", **given)
    add_options(parser, PageConfig, title="page", **given)


def configs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Configs:
    """The three configs the parsed options ask for (no RemoteConfig without --upstream); bad values exit."""
    try:
        remote = values(RemoteConfig, args)
        return (EngineConfig(**values(EngineConfig, args)), ServerConfig(**values(ServerConfig, args)),
                RemoteConfig(**remote) if remote.get("url") else None)
    except (TypeError, ValueError) as e:
        parser.error(str(e))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nsample", description="n independently seeded choices, computed together.",
                                     allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve_parser = commands.add_parser("serve", help="serve the OpenAI-compatible API (/v1/chat/completions, ...)",
                                       description="Serve the OpenAI-compatible API. Every option can also be set "
                                                   "by the environment variable named in its help.",
                                       allow_abbrev=False)
    add_serve_options(serve_parser)
    return parser


def serve(engine_config: EngineConfig, config: ServerConfig, remote: RemoteConfig | None = None) -> None:
    import uvicorn

    import nsample
    from nsample.server import create_app
    from nsample.server.connections import uvicorn_options

    if remote is not None:
        from nsample.remote import RemoteEngine

        engine = RemoteEngine(remote, engine_config)
    else:
        engine = nsample.load(**dataclasses.asdict(engine_config))
    try:
        print(f"nsample: serving {engine.name!r} at http://{config.host}:{config.port}/v1"
              f"{' (API key required)' if config.api_key else ''}", file=sys.stderr)
        uvicorn.run(create_app(engine, config), **uvicorn_options(config))
    finally:
        engine.close()


def main(argv: list[str] | None = None) -> None:
    from nsample.errors import NSampleError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "serve":
        parser.print_help()
        parser.exit(2)
    try:
        serve(*configs(parser, args))
    except NSampleError as e:
        parser.exit(1, f"nsample: {e.message}\n")


if __name__ == "__main__":
    main()
