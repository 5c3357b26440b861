"""A run as data: the usage table (pandas), a JSON record (with the page's tree of runs) and the two downloads."""
import json
import re
import shutil
import time
from pathlib import Path

import pandas as pd

import nsample
from nsample import analysis
from nsample.models.prompts import Chat
from nsample.ui.run import Run
from nsample.ui.tree import RunTree

TABLE_COLUMNS = ["index", "seed", "completion_tokens", "finish_reason", "time_s", "text"]
LOGPROB_COLUMNS = ["mean_logprob", "perplexity"]


def usage_table(run: Run, text: bool = True) -> pd.DataFrame:
    """One row per choice from what the page received (any ended run), with seconds and, if any, logprobs."""
    df = run.to_dataframe()
    df["time_s"] = [None if c.time_s is None else round(c.time_s, 3) for c in run.cards]
    columns = TABLE_COLUMNS if text else TABLE_COLUMNS[:-1]
    if run.has_logprobs:
        df["perplexity"] = analysis.perplexity(df["mean_logprob"].astype(float))
        columns = columns[:4] + LOGPROB_COLUMNS + columns[4:]
    return df[columns]


def run_record(run: Run, diversity: dict | None = None) -> dict:
    """Everything needed to understand and re-run this run: prompt, parameters, seeds, choices, usage, branch."""
    spec, res = run.spec, run.result
    engine_prompt = spec.engine_prompt
    if isinstance(engine_prompt, Chat):
        prompt = {"mode": spec.mode, "messages": engine_prompt.messages, "continue_final_message": True}
    else:
        prompt = {"mode": spec.mode, "prompt" if spec.mode == "completion" else "messages": engine_prompt}
    if spec.continuation:
        prompt["continued"] = spec.continuation  # the answer so far, already at the end of the prompt
    choices = []
    for card in run.cards:
        c = res.choices[card.index] if res is not None else None
        choices.append({"index": card.index, "seed": card.seed, "text": card.text,
                        "token_ids": c.token_ids if c is not None and run.ids_reported else None,
                        "completion_tokens": card.tokens, "finish_reason": card.finish_reason,
                        "time_s": card.time_s, "mean_logprob": card.mean_logprob,
                        "rating": run.ratings.of(card.index)})
    record = {"nsample_version": nsample.__version__, "model": run.model, "run": run.id,
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "prompt": prompt,
              "parameters": {**spec.sampling, "seeds": [c.seed for c in run.cards]},
              "choices": choices, "cancelled": run.cancelled}
    if run.origin is not None:
        o = run.origin
        record["branch"] = {"parent": o.parent, "choice": o.choice, "cut": o.cut, "text": o.text}
    if run.blind is not None:  # the cards were shown shuffled (this order), anonymous until revealed
        record["blind"] = {"seed": run.blind.seed, "order": run.blind.order, "revealed": run.blind.revealed}
    if run.error is not None:
        record["error"] = run.error
    if res is not None:
        t = res.timings
        record["usage"] = res.usage.to_dict()
        record["timings"] = {"queued_s": t.queued_s, "prefill_s": t.prefill_s, "decode_s": t.decode_s,
                             "tokens_per_s": t.tokens_per_s}
    if diversity is not None:
        record["diversity"] = diversity
    return record


def tree_record(tree: RunTree) -> list[dict]:
    """Every run of the page, parents before children: each record's "branch" names its parent run."""
    return [run_record(tree.runs[i], getattr(tree.runs[i].report, "diversity", None)) for _, i in tree.outline()]


def write_exports(run: Run, folder: str | Path, diversity: dict | None = None,
                  tree: RunTree | None = None) -> tuple[Path, Path]:
    """Write `<stem>.json` (the record, with the tree of runs) and `<stem>.csv` (the usage table) into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"nsample-{re.sub(r'[^A-Za-z0-9._-]+', '_', run.model)}-n{len(run.cards)}-{time.strftime('%Y%m%d-%H%M%S')}"
    json_path, csv_path = folder / f"{stem}.json", folder / f"{stem}.csv"
    record = run_record(run, diversity)
    if tree is not None:
        record["tree"] = tree_record(tree)
    json_path.write_text(json.dumps(record, indent=2, ensure_ascii=False, default=_plain))
    usage_table(run).to_csv(csv_path, index=False)
    return json_path, csv_path


def prune_exports(folder: str | Path, max_age_s: float = 3600) -> None:
    """Delete export folders older than `max_age_s` (Gradio serves its own copies of the files)."""
    now = time.time()
    for old in Path(folder).glob("*/"):
        if now - old.stat().st_mtime > max_age_s:
            shutil.rmtree(old, ignore_errors=True)


def _plain(value):
    """numpy scalars and arrays from analysis results, as JSON values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return str(value)
