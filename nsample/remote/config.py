"""Remote engine configuration: one dataclass; the --upstream… options and $NSAMPLE_UPSTREAM… derive from it."""
import argparse
import os
from dataclasses import MISSING, dataclass, field, fields

MODES = ("auto", "native", "fanout")


def _opt(help: str, **kw):
    return field(metadata={"help": help}, **kw)


@dataclass(frozen=True)
class RemoteConfig:
    url: str = _opt("an OpenAI-compatible server's base URL, e.g. http://host:8000/v1 (vLLM, SGLang, llama.cpp, "
                    "Ollama, TGI, another nsample)")
    api_key: str | None = _opt("API key sent to the upstream as a Bearer token", default=None)
    model: str | None = _opt("the upstream's model name (default: the first one its /v1/models lists)", default=None)
    mode: str = _opt("how n choices are made: native = pass n through in one request, fanout = n single-choice "
                     "requests with seeds seed+i, auto = probe the upstream once", default="auto")
    timeout: float = _opt("seconds to wait for each upstream response (or streamed chunk)", default=600.0)
    connect_timeout: float = _opt("seconds to wait for a connection to the upstream", default=10.0)
    concurrency: int = _opt("upstream requests at once for one nsample request (fan-out)", default=16)
    max_connections: int = _opt("pooled connections to the upstream, over all requests", default=256)

    def __post_init__(self):
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"the upstream URL must start with http:// or https://, got {self.url!r}")
        url = self.url.rstrip("/")
        object.__setattr__(self, "url", url if url.count("/") > 2 else url + "/v1")  # bare host: add /v1
        if self.mode not in MODES:
            raise ValueError(f"the upstream mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.timeout <= 0 or self.connect_timeout <= 0:
            raise ValueError("upstream timeouts must be positive")
        if self.concurrency < 1 or self.max_connections < 1:
            raise ValueError("upstream concurrency and max_connections must be at least 1")


def _flag(name: str) -> str:
    return "--upstream" if name == "url" else "--upstream-" + name.replace("_", "-")


def _env(name: str) -> str:
    return "NSAMPLE_UPSTREAM" if name == "url" else "NSAMPLE_UPSTREAM_" + name.upper()


def _kind(f):
    return float if f.type is float else int if f.type is int else _url if f.name == "url" else str


def _url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"the upstream URL must start with http:// or https://, got {value!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --upstream, --upstream-api-key, … (defaults from $NSAMPLE_UPSTREAM, $NSAMPLE_UPSTREAM_API_KEY, …)."""
    group = parser.add_argument_group("remote engine", "serve an OpenAI-compatible upstream instead of a local model")
    for f in fields(RemoteConfig):
        default = None if f.default is MISSING else f.default
        group.add_argument(_flag(f.name), dest="upstream_" + f.name, type=_kind(f),
                           default=os.environ.get(_env(f.name), argparse.SUPPRESS),  # unset: not in the namespace
                           choices=MODES if f.name == "mode" else None,
                           help=f"{f.metadata['help']} (${_env(f.name)}; default: {default})".replace("%", "%%"))


def pop_options(options: dict) -> RemoteConfig | None:
    """Take the upstream_* entries out of parsed options: the RemoteConfig they ask for, or None without --upstream."""
    given = {f.name: options.pop("upstream_" + f.name, None) for f in fields(RemoteConfig)}
    if not given["url"]:
        return None
    return RemoteConfig(**{f.name: _kind(f)(given[f.name]) for f in fields(RemoteConfig) if given[f.name] is not None})
