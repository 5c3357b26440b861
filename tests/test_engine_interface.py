"""One engine interface for the local and the remote engine: shared checks, seeds, grouping; remote without torch."""
import subprocess
import sys

import pytest

from nsample import SamplingParams
from nsample.engine import Engine
from nsample.engine.engine_base import BaseEngine, choice_groups, prompt_param, wrap_seed
from nsample.models.prompts import Chat
from nsample.remote import RemoteEngine
from nsample.sampling_params import INT64_MAX, INT64_MIN


def test_both_engines_share_one_interface():
    for cls in (Engine, RemoteEngine):
        assert issubclass(cls, BaseEngine)
        for shared in ("stream", "astream", "check", "seeds"):
            assert getattr(cls, shared) is getattr(BaseEngine, shared)
    assert RemoteEngine.seed_bits == 31 < Engine.seed_bits


def test_seeds_groups_and_prompt_kinds_are_written_once():
    engine = BaseEngine()
    assert engine.seeds(SamplingParams(n=3, seed=INT64_MAX - 1)) == [INT64_MAX - 1, INT64_MAX, INT64_MIN]
    unseeded = engine.seeds(SamplingParams(n=4))
    assert [s - unseeded[0] for s in unseeded] == [0, 1, 2, 3] and wrap_seed(unseeded[0]) == unseeded[0]
    assert choice_groups(SamplingParams(n=3, temperature=0)) == [[0, 1, 2]]
    assert choice_groups(SamplingParams(n=3)) == [[0], [1], [2]]
    chat = [{"role": "user", "content": "hi"}]
    assert [prompt_param(p) for p in (chat, Chat(chat), "hi", [1, 2])] == ["messages", "messages", "prompt", "prompt"]


def test_max_n_is_checked_alike(tiny_engine):
    with pytest.raises(Exception) as e:
        tiny_engine.submit("hi", n=tiny_engine.config.max_n + 1)
    assert e.value.code == "integer_above_max_value"


def test_the_remote_path_does_not_import_torch():
    code = ("import sys, nsample, nsample.remote, nsample.server, nsample.cli, nsample.ui; "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
