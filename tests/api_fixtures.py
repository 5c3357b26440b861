"""Fixtures for the API tests (a pytest plugin: `pytest_plugins = ["api_fixtures"]`): a live server, clients."""
import httpx
import openai
import pytest
from api_helpers import TIMEOUT
from live_server import live_server

from nsample.server import ServerConfig, create_app


@pytest.fixture(scope="module")
def base_url(tiny_engine):
    with live_server(create_app(tiny_engine, ServerConfig())) as url:
        yield url


@pytest.fixture
def client(base_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=TIMEOUT)


@pytest.fixture
def aclient(base_url) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=TIMEOUT)


@pytest.fixture
def http(base_url):
    with httpx.Client(base_url=base_url, timeout=TIMEOUT) as c:
        yield c
