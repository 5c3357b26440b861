"""The options table of docs/options.md, written from the dataclasses the options come from (nsample/options.py).

  python scripts/options_table.py           print the table
  python scripts/options_table.py --write   put it into docs/options.md, between its two marker lines
tests/test_docs.py checks the page holds exactly what this prints, so a new field cannot go undocumented.
"""
import sys
import typing
from dataclasses import MISSING, fields
from pathlib import Path

from nsample.cli import PageConfig
from nsample.config import EngineConfig
from nsample.options import env_name, option_name, value_type
from nsample.remote.config import RemoteConfig
from nsample.server.config import ServerConfig

GROUPS = [(EngineConfig, "", "nsample/config.py"), (ServerConfig, "", "nsample/server/config.py"),
          (RemoteConfig, "upstream", "nsample/remote/config.py"), (PageConfig, "", "nsample/cli.py")]
PAGE = Path(__file__).resolve().parents[1] / "docs" / "options.md"
BEGIN, END = "<!-- options table: begin (scripts/options_table.py --write) -->", "<!-- options table: end -->"


def flag(f, prefix: str, kind) -> str:
    name = option_name(f, prefix)
    return f"`--{name}` / `--no-{name}`" if kind is bool else f"`--{name}`"


def table() -> str:
    out = []
    for cls, prefix, where in GROUPS:
        hints = typing.get_type_hints(cls)
        out += [f"**{cls.__name__}** (`{where}`): {(cls.__doc__ or '').strip().splitlines()[0]}", "",
                "| option | environment | default | what it does |", "| --- | --- | --- | --- |"]
        for f in fields(cls):
            kind = value_type(hints[f.name])
            default = "unset" if f.default is MISSING else f.default
            choices = f.metadata.get("choices")
            text = f.metadata["help"] + (f" (one of {', '.join(choices)})" if choices else "")
            text = text.replace("|", r"\|").replace("<", "&lt;")  # a table cell, rendered as HTML
            out.append(f"| {flag(f, prefix, kind)} | `{env_name(option_name(f, prefix))}` | `{default}` | {text} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def written(page: str) -> str:
    head, rest = page.split(BEGIN + "\n", 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + table() + END + tail


if __name__ == "__main__":
    if "--write" in sys.argv:
        PAGE.write_text(written(PAGE.read_text()))
    else:
        print(table(), end="")
