"""lm-eval-harness's `local-completions` model scores a loglikelihood task against a live nsample server: the
per-choice loglikelihoods it computes from nsample's echoed prompt logprobs equal transformers' forward."""
import json
from pathlib import Path

import pytest
import torch
from live_server import live_server

from nsample.server import ServerConfig, create_app

lm_eval = pytest.importorskip("lm_eval")
TASK_DIR = Path(__file__).parent / "lm_eval_task"


@pytest.fixture
def task_dir(tmp_path) -> Path:
    """The task's YAML with its data file's absolute path (lm-eval reads the JSON lines with `datasets`)."""
    yaml = (TASK_DIR / "nsample_arith.yaml").read_text().replace("DATA_FILE", str(TASK_DIR / "arith.jsonl"))
    (tmp_path / "nsample_arith.yaml").write_text(yaml)
    return tmp_path


def loglikelihood(model, context: list[int], continuation: list[int]) -> float:
    with torch.inference_mode():
        logp = model(torch.tensor([context + continuation])).logits[0].float().log_softmax(-1)
    return sum(logp[len(context) + j - 1, t].item() for j, t in enumerate(continuation))


def test_local_completions_scores_a_multiple_choice_task(tiny_engine, task_dir, tmp_path, monkeypatch):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tokenizer_dir = tmp_path / "tokenizer"
    tiny_engine.tokenizer.save_pretrained(tokenizer_dir)
    with live_server(create_app(tiny_engine, ServerConfig())) as url:
        args = (f"model={tiny_engine.name},base_url={url}/v1/completions,tokenizer={tokenizer_dir},"
                "tokenizer_backend=huggingface,num_concurrent=2,max_retries=1")
        out = simple_evaluate(model="local-completions", model_args=args, tasks=["nsample_arith"],
                              task_manager=TaskManager(include_path=str(task_dir)), log_samples=True,
                              apply_chat_template=False)
    samples = out["samples"]["nsample_arith"]
    assert len(samples) == 20 and 0 <= out["results"]["nsample_arith"]["acc,none"] <= 1
    tok = tiny_engine.tokenizer
    for sample in samples:
        doc = sample["doc"]
        context = tok(f"Question: {doc['question']}\nAnswer:", add_special_tokens=False)["input_ids"]
        for choice, (ll, _greedy) in zip(doc["choices"], [r[0] for r in sample["resps"]]):  # joined by " "
            whole = tok(f"Question: {doc['question']}\nAnswer: {choice}", add_special_tokens=False)["input_ids"]
            assert whole[:len(context)] == context  # the continuation's tokens start where the context's end
            expected = loglikelihood(tiny_engine.model, context, whole[len(context):])
            assert float(ll) == pytest.approx(expected, abs=1e-3), json.dumps(doc)
