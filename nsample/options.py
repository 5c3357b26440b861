"""Config dataclass fields as command-line options and environment variables, each described once, in its field.

A field declared as `max_n: int = option(128, "the largest n one request may ask for")` becomes `--max-n`, read
from `$NSAMPLE_MAX_N` when the flag is not given; type, default and help come from the field. `nsample serve` and
app.py build their options from the same dataclasses (nsample/cli.py), so both take the same set.
"""
import argparse
import os
import typing
from dataclasses import MISSING, Field, field, fields

ENV_PREFIX = "NSAMPLE_"
METAVARS = {int: "N", float: "NUM"}
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def option(default=MISSING, help: str = "", *, name: str | None = None, choices: tuple | None = None) -> Field:
    """A dataclass field that is also an option: --name (the field's name by default) and $NSAMPLE_NAME."""
    return field(default=default, metadata={"help": help, "name": name, "choices": choices})


def option_name(f: Field, prefix: str = "") -> str:
    return f.metadata.get("name") or "-".join(filter(None, [prefix, f.name.replace("_", "-")]))


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper().replace("-", "_")


def boolean(text: str) -> bool:
    if text.strip().lower() in TRUE + FALSE:
        return text.strip().lower() in TRUE
    raise argparse.ArgumentTypeError(f"expected one of {', '.join(TRUE + FALSE)}, got {text!r}")


def value_type(hint) -> type:
    """The type an option's text converts to: int for `int | None`."""
    return next((a for a in typing.get_args(hint) if a is not type(None)), hint)


def dest(cls, f: Field) -> str:
    return f"{cls.__name__}.{f.name}"


def add_options(parser: argparse.ArgumentParser, cls, *, prefix: str = "", title: str | None = None,
                defaults: dict | None = None, env_aliases: dict | None = None) -> None:
    """One option per field of `cls`. Precedence: the flag, then its environment variable(s), then `defaults`
    (by option name: a caller's own defaults, e.g. app.py's port), then the field's default. Options left unset
    stay out of the namespace, so the dataclass default applies."""
    defaults, env_aliases = defaults or {}, env_aliases or {}
    group = parser.add_argument_group(title or cls.__name__, (cls.__doc__ or "").strip().splitlines()[0] or None)
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        if not f.metadata.get("help"):
            raise TypeError(f"{cls.__name__}.{f.name} has no help text: declare it as option(default, help)")
        name, kind = option_name(f, prefix), value_type(hints[f.name])
        convert = boolean if kind is bool else kind
        envs = (env_name(name), *env_aliases.get(name, ()))
        default = defaults.get(name, f.default)
        shown = "unset" if default is MISSING else default
        text = f"{f.metadata['help']} (${' or $'.join(envs)}; default: {shown})".replace("%", "%%")
        start = default if name in defaults else argparse.SUPPRESS
        choices = f.metadata.get("choices")
        if (env := next((e for e in envs if os.environ.get(e)), None)) is not None:
            try:
                start = convert(os.environ[env])
            except (argparse.ArgumentTypeError, ValueError) as e:
                parser.error(f"${env}: {e}")
            if choices and start not in choices:
                parser.error(f"${env}: expected one of {', '.join(choices)}, got {start!r}")
        kw = ({"action": argparse.BooleanOptionalAction} if kind is bool else
              {"type": convert, "metavar": None if choices else METAVARS.get(kind, "TEXT")})
        group.add_argument("--" + name, dest=dest(cls, f), default=start, choices=choices, help=text, **kw)


def values(cls, namespace: argparse.Namespace) -> dict:
    """The fields of `cls` that the parsed options set (by flag, environment or caller default)."""
    given = vars(namespace)
    return {f.name: given[dest(cls, f)] for f in fields(cls) if dest(cls, f) in given}
