"""The `nsample` command. `nsample serve` loads a model and serves the OpenAI-compatible API; `nsample build-kernels`
builds the C++ kernels a quantized model decodes with, ahead of a first start (nsample/cpu/kernels.py).

Its options come from the fields of EngineConfig, ServerConfig and RemoteConfig (nsample.options): name, type,
default, help and environment variable are written once, in the dataclass. app.py takes the same options.
"""
import argparse
import dataclasses
import sys
from dataclasses import dataclass

from nsample.config import EngineConfig
from nsample.cpu.instruction_sets import ISA_FLAGS
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
    kernels_parser = commands.add_parser("build-kernels", help="build the C++ kernels for this machine (once)",
                                         description="Build nsample's C++ kernels for this CPU's instruction set, "
                                                     "as a first start would; a no-op once they are built.",
                                         allow_abbrev=False)
    kernels_parser.add_argument("--isa", default="auto",
                                help="auto (this CPU's best, or NSAMPLE_ISA), all (every one this CPU runs), or an "
                                     f"instruction set: {', '.join(ISA_FLAGS)} (default: %(default)s)")
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


def build_kernels(which: str) -> int:
    """`nsample build-kernels`: 0 once each instruction set asked for has its kernels built here, else 1 (2: a bad
    --isa or NSAMPLE_ISA), each reason on stderr."""
    import os

    from nsample.cpu import kernels

    if which not in ("auto", "all", *ISA_FLAGS):
        _say(f"--isa must be auto, all or one of {', '.join(ISA_FLAGS)}; got {which!r}")
        return 2
    try:
        asked = kernels.runnable() if which == "all" else [kernels.isa() if which == "auto" else which]
    except ValueError as e:  # a bad NSAMPLE_ISA
        _say(str(e))
        return 2
    if not asked or asked == [None]:
        _say("this CPU runs none of nsample's kernels (no AVX2, no NEON): the ATen ops run instead")
        return 1
    built = [_build_one(kernels, isa) for isa in asked]
    if os.environ.get("NSAMPLE_NO_CPP"):
        _say("NSAMPLE_NO_CPP is set here, so nsample does not use them")
    return 0 if all(built) else 1


def _build_one(kernels, isa: str) -> bool:
    """Build (or find built) one instruction set's kernels and say where they are, or why they cannot be had."""
    if isa not in kernels.runnable():
        _say(f"this CPU does not run {isa} (it runs {', '.join(kernels.runnable()) or 'none'})")
        return False
    try:
        print(f"nsample: C++ kernels for {isa} at {kernels.build(isa).__file__}")
        return True
    except Exception as e:  # noqa: BLE001 - no compiler, a build elsewhere past the wait: the reason is the answer
        _say(f"the C++ kernels for {isa} cannot be built here: {e}")
        return False


def _say(why: str) -> None:
    print(f"nsample: {why}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    from nsample.errors import NSampleError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "build-kernels":
        parser.exit(build_kernels(args.isa))
    if args.command != "serve":
        parser.print_help()
        parser.exit(2)
    try:
        serve(*configs(parser, args))
    except NSampleError as e:
        parser.exit(1, f"nsample: {e.message}\n")


if __name__ == "__main__":
    main()
