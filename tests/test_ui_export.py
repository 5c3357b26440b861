"""Export of a run (JSON record, CSV table) and the report built from nsample.analysis, on the tiny engine."""
import json
import math
import os
import time

import pandas as pd
import pytest
from test_ui_handlers import wait_idle

from nsample.ui import handlers, report
from nsample.ui.api_help import api_base, api_snippet
from nsample.ui.export import prune_exports, run_record, usage_table, write_exports
from nsample.ui.run import RunSpec

SPEC = RunSpec(mode="chat", system="You are terse.", user="Name a fruit.", n=3, seed=11, temperature=0.9,
               top_p=0.95, max_tokens=16, stop=("\n\n",))


@pytest.fixture(scope="module")
async def finished_run(tiny_engine):
    run = None
    async for run in handlers.generate(tiny_engine, SPEC):
        pass
    return run


def test_usage_table_has_one_row_per_choice(finished_run):
    table = usage_table(finished_run)
    assert list(table.columns) == ["index", "seed", "completion_tokens", "finish_reason", "time_s", "text"]
    assert table["index"].tolist() == [0, 1, 2] and table["seed"].tolist() == [11, 12, 13]
    assert table["completion_tokens"].tolist() == [len(c.token_ids) for c in finished_run.result.choices]
    assert table["text"].tolist() == [c.text for c in finished_run.cards]
    assert (table["time_s"] > 0).all()
    assert "text" not in usage_table(finished_run, text=False).columns


def test_json_and_csv_files(finished_run, tmp_path):
    json_path, csv_path = write_exports(finished_run, tmp_path, diversity={"n": 3, "vendi_score": 2.5})
    record = json.loads(json_path.read_text())
    assert record["model"] == "nsample/tiny-random"
    assert record["prompt"] == {"mode": "chat", "messages": [{"role": "system", "content": "You are terse."},
                                                             {"role": "user", "content": "Name a fruit."}]}
    assert record["parameters"] == {"n": 3, "seed": 11, "temperature": 0.9, "top_p": 0.95, "max_tokens": 16,
                                    "stop": ["\n\n"], "logprobs": False, "seeds": [11, 12, 13]}
    res = finished_run.result
    assert [c["text"] for c in record["choices"]] == [c.text for c in res.choices]
    assert [c["token_ids"] for c in record["choices"]] == [c.token_ids for c in res.choices]
    assert [c["finish_reason"] for c in record["choices"]] == [c.finish_reason for c in res.choices]
    assert record["usage"] == res.usage.to_dict() and record["usage"]["completion_tokens"] > 0
    assert record["diversity"]["vendi_score"] == 2.5 and record["cancelled"] is False
    csv = pd.read_csv(csv_path, keep_default_na=False)
    assert len(csv) == 3 and csv["seed"].tolist() == [11, 12, 13]
    assert csv["text"].tolist() == [c.text for c in res.choices]


async def test_record_of_a_stopped_run(tiny_engine):
    stream = handlers.generate(tiny_engine, RunSpec(mode="completion", prompt="A", n=2, max_tokens=500))
    async for run in stream:
        if run.cards[0].tokens:
            break
    await stream.aclose()
    await wait_idle(tiny_engine)  # the engine wakes this test's event loop until the request is gone
    record = run_record(run)
    assert record["cancelled"] is True and "usage" not in record
    assert [c["finish_reason"] for c in record["choices"]] == ["cancelled", "cancelled"]
    assert usage_table(run)["finish_reason"].tolist() == ["cancelled", "cancelled"]


def test_report_uses_the_analysis_module(finished_run):
    rep = report.summarize(finished_run)
    assert rep.diversity["n"] == 3 and 0 < rep.diversity["vendi_score"] <= 3
    assert "Vendi score" in rep.headline and "distinct-1" in rep.headline
    assert rep.tokens_figure.data and rep.similarity_figure.data[0].type == "heatmap"
    assert len(rep.similarity_figure.data[0].z) == 3
    json.dumps(rep.diversity)  # plain values for the export


async def test_report_of_one_choice_has_no_pairs(tiny_engine):
    async for run in handlers.generate(tiny_engine, RunSpec(n=1, max_tokens=6)):
        pass
    rep = report.summarize(run)
    assert rep.diversity["mean_similarity"] is None and "n/a" in rep.headline
    assert not any(isinstance(v, float) and math.isnan(v) for v in rep.diversity.values())


def test_api_snippet_uses_the_page_base_url():
    base = api_base("https://user-nsample.hf.space/?__theme=dark")
    assert base == "https://user-nsample.hf.space"
    code = api_snippet(base, "SmolLM2-135M-Instruct")
    assert 'base_url="https://user-nsample.hf.space/v1"' in code and 'model="SmolLM2-135M-Instruct"' in code
    compile(code, "snippet", "exec")
    keyed = api_snippet(base, "m", key_required=True)
    assert 'os.environ["NSAMPLE_API_KEY"]' in keyed
    compile(keyed, "snippet", "exec")


def test_prune_exports_keeps_recent_folders(finished_run, tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    write_exports(finished_run, old)
    write_exports(finished_run, new)
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    prune_exports(tmp_path, max_age_s=3600)
    assert not old.exists() and len(list(new.iterdir())) == 2
