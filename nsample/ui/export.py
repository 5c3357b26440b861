"""A finished run as data: the usage table (pandas), a JSON record and the two download files."""
import json
import re
import shutil
import time
from pathlib import Path

import pandas as pd

import nsample
from nsample.ui.run import Run

TABLE_COLUMNS = ["index", "seed", "completion_tokens", "finish_reason", "time_s", "text"]


def usage_table(run: Run, text: bool = True) -> pd.DataFrame:
    """One row per choice: the engine's own table plus the seconds each choice took on this page."""
    if run.result is not None:
        df = run.result.to_dataframe()
    else:  # stopped early: what arrived
        df = pd.DataFrame([{"index": c.index, "seed": c.seed, "text": c.text, "completion_tokens": c.tokens}
                           for c in run.cards])
    df["finish_reason"] = [c.finish_reason for c in run.cards]
    df["time_s"] = [None if c.time_s is None else round(c.time_s, 3) for c in run.cards]
    return df[TABLE_COLUMNS if text else TABLE_COLUMNS[:-1]]


def run_record(run: Run, diversity: dict | None = None) -> dict:
    """Everything needed to understand and re-run this run: prompt, parameters, seeds, choices, usage."""
    spec, res = run.spec, run.result
    prompt = ({"mode": "completion", "prompt": spec.prompt} if spec.mode == "completion" else
              {"mode": "chat", "messages": spec.engine_prompt})
    choices = []
    for card in run.cards:
        c = res.choices[card.index] if res is not None else None
        choices.append({"index": card.index, "seed": card.seed, "text": card.text,
                        "token_ids": c.token_ids if c is not None else None,
                        "completion_tokens": card.tokens, "finish_reason": card.finish_reason,
                        "time_s": card.time_s})
    record = {"nsample_version": nsample.__version__, "model": run.model,
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "prompt": prompt,
              "parameters": {**spec.sampling, "seeds": [c.seed for c in run.cards]},
              "choices": choices, "cancelled": run.cancelled}
    if res is not None:
        t = res.timings
        record["usage"] = res.usage.to_dict()
        record["timings"] = {"queued_s": t.queued_s, "prefill_s": t.prefill_s, "decode_s": t.decode_s,
                             "tokens_per_s": t.tokens_per_s}
    if diversity is not None:
        record["diversity"] = diversity
    return record


def write_exports(run: Run, folder: str | Path, diversity: dict | None = None) -> tuple[Path, Path]:
    """Write `<stem>.json` (the record) and `<stem>.csv` (the usage table with texts) into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"nsample-{re.sub(r'[^A-Za-z0-9._-]+', '_', run.model)}-n{len(run.cards)}-{time.strftime('%Y%m%d-%H%M%S')}"
    json_path, csv_path = folder / f"{stem}.json", folder / f"{stem}.csv"
    json_path.write_text(json.dumps(run_record(run, diversity), indent=2, ensure_ascii=False, default=_plain))
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
