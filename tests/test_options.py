"""One set of options: `nsample serve` and `python app.py` derive theirs from the config dataclasses' fields."""
import importlib.util
import os
from dataclasses import fields
from pathlib import Path

import pytest

from nsample.cli import build_parser, configs
from nsample.config import EngineConfig
from nsample.options import env_name, option_name
from nsample.remote import RemoteConfig
from nsample.server import ServerConfig

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ((EngineConfig, ""), (ServerConfig, ""), (RemoteConfig, "upstream"))
APP_ENV = ("PORT", "GRADIO_SERVER_PORT", "GRADIO_SERVER_NAME", "SYSTEM")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in [*os.environ]:
        if name.startswith("NSAMPLE_") or name in APP_ENV:
            monkeypatch.delenv(name)


@pytest.fixture
def app():
    spec = importlib.util.spec_from_file_location("nsample_app_entry", ROOT / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serve_parser():
    return build_parser()._subparsers._group_actions[0].choices["serve"]


def serve(*argv: str):
    parser = serve_parser()
    return configs(parser, parser.parse_args(argv))


def options(parser) -> dict[str, tuple]:
    """Each --option's (dest, kind of value, choices) as the parser knows it."""
    return {a.option_strings[0]: (a.dest, a.type, a.choices, type(a).__name__)
            for a in parser._actions if a.option_strings and a.dest != "help"}


def test_serve_and_app_take_the_same_options(app):
    assert options(serve_parser()) == options(app.build_parser())


def test_every_field_is_an_option_with_help_and_an_environment_variable(capsys):
    with pytest.raises(SystemExit):
        serve_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for cls, prefix in CONFIGS:
        for f in fields(cls):
            name = option_name(f, prefix)
            assert f.metadata["help"], f.name
            assert f"--{name}" in text and f"${env_name(name)}" in text
    for name in ("max-n", "max-queue", "decode-width", "quantize", "shared-prefix", "upstream-mode"):
        assert f"--{name}" in text


def test_no_option_restates_a_default():
    assert serve() == (EngineConfig(), ServerConfig(), None)


def test_flags_environment_and_their_precedence(monkeypatch):
    monkeypatch.setenv("NSAMPLE_MAX_N", "16")
    monkeypatch.setenv("NSAMPLE_API_KEY", "from-env")
    monkeypatch.setenv("NSAMPLE_SHARED_PREFIX", "false")
    engine, server, remote = serve("--model", "m", "--served-model-name", "x", "--max-queue", "3", "--port", "9000",
                                   "--kv-budget-gb", "0.5", "--decode-width", "8")
    assert engine == EngineConfig(model="m", served_model_name="x", max_queue=3, kv_budget_gb=0.5, max_n=16,
                                  decode_width=8, shared_prefix=False)
    assert server == ServerConfig(api_key="from-env", port=9000) and remote is None
    engine, server, _ = serve("--max-n", "4", "--api-key", "flag", "--shared-prefix")
    assert (engine.max_n, server.api_key, engine.shared_prefix) == (4, "flag", True)  # the flag wins


@pytest.mark.parametrize("argv, env", [(["--max-n", "many"], {}), (["--log-level", "loud"], {}),
                                       ([], {"NSAMPLE_MAX_N": "many"}), ([], {"NSAMPLE_SHARED_PREFIX": "maybe"}),
                                       ([], {"NSAMPLE_UPSTREAM_MODE": "sometimes"}),
                                       (["--upstream", "gpu-box:8000"], {}),
                                       (["--upstream", "http://h/v1", "--upstream-mode", "sometimes"], {})])
def test_bad_values_exit_with_a_message(monkeypatch, capsys, argv, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SystemExit):
        serve(*argv)
    assert "error:" in capsys.readouterr().err


def test_remote_options_build_a_remote_config(monkeypatch):
    monkeypatch.setenv("NSAMPLE_UPSTREAM_API_KEY", "from-env")
    engine, _, remote = serve("--upstream", "http://gpu-box:8000", "--upstream-mode", "fanout",
                              "--upstream-timeout", "30", "--max-n", "16")
    assert remote == RemoteConfig("http://gpu-box:8000/v1", api_key="from-env", mode="fanout", timeout=30.0)
    assert engine == EngineConfig(max_n=16)
    monkeypatch.setenv("NSAMPLE_UPSTREAM", "https://example.org/api/v1/")
    assert serve()[2].url == "https://example.org/api/v1"


def test_app_defaults_local_and_on_spaces(app, monkeypatch):
    assert app.parse_args([]) == (EngineConfig(), ServerConfig(port=7860), None)
    monkeypatch.setenv("SYSTEM", "spaces")
    engine, server, _ = app.parse_args([])
    assert (engine.model, server.host, server.port) == ("HuggingFaceTB/SmolLM2-135M-Instruct", "0.0.0.0", 7860)
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.2")
    monkeypatch.setenv("NSAMPLE_MODEL", "nsample/tiny-random")
    engine, server, _ = app.parse_args([])
    assert (engine.model, server.host) == ("nsample/tiny-random", "127.0.0.2")  # the environment beats Spaces


def test_app_port_from_spaces_names_and_flags(app, monkeypatch):
    monkeypatch.setenv("PORT", "9001")
    engine, server, _ = app.parse_args(["--max-n", "8", "--quantize", "none", "--max-queue", "5"])
    assert (server.port, engine.max_n, engine.quantize, engine.max_queue) == (9001, 8, "none", 5)
    monkeypatch.delenv("PORT")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "9003")
    assert app.parse_args([])[1].port == 9003
    assert app.parse_args(["--port", "9002", "--host", "0.0.0.0"])[1] == ServerConfig(host="0.0.0.0", port=9002)
