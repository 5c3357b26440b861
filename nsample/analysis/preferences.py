"""Preference pairs from n choices, in the format TRL's DPO trainer reads: prompt, chosen, rejected.

A text prompt gives TRL's standard form (strings); chat messages give its conversational form (lists of
messages, the answers as one assistant message each). Every row also names both choices' indices and seeds and
the request's settings, so each side can be re-generated alone (choice i is seeded seed + i).
"""
from collections.abc import Iterable
from dataclasses import asdict

import pandas as pd

from nsample.analysis.inputs import Choices, choices_frame
from nsample.models.prompts import Chat
from nsample.outputs import GenerationResult

PAIR_COLUMNS = ["prompt", "chosen", "rejected", "chosen_index", "rejected_index", "chosen_seed", "rejected_seed",
                "model", "settings"]


def preference_pairs(result: Choices, chosen: Iterable[int], rejected: Iterable[int], prompt=None,
                     settings: dict | None = None) -> pd.DataFrame:
    """One row per (chosen, rejected) pair of choice indices, chosen-major, in TRL's DPO columns.

    `prompt` is text or chat messages (a list of {"role", "content"}; a prompts.Chat whose final assistant
    message was continued puts that message's text in front of both answers). For a GenerationResult it defaults
    to the result's own prompt, and `settings` to its sampling parameters. Write the rows for TRL with
    `frame.to_json(path, orient="records", lines=True)`, or load them with `datasets.Dataset.from_pandas`."""
    frame = choices_frame(result)
    if isinstance(result, GenerationResult):
        prompt = result.prompt if prompt is None else prompt
        if settings is None and result.params is not None:
            settings = asdict(result.params)
    if prompt is None:
        raise ValueError("preference pairs need the prompt: pass prompt= (text or chat messages); a "
                         "GenerationResult carries its own")
    good, bad = _indices(chosen, len(frame), "chosen"), _indices(rejected, len(frame), "rejected")
    if both := sorted(set(good) & set(bad)):
        raise ValueError(f"choice {both[0]} is both chosen and rejected")
    prompt_value, answer = _prompt_form(prompt)
    by_index = frame.set_index(frame["index"].astype(int), drop=False)
    model = result.model if isinstance(result, GenerationResult) else None
    rows = []
    for c in good:
        for r in bad:
            rows.append({"prompt": prompt_value, "chosen": answer(by_index.at[c, "text"]),
                         "rejected": answer(by_index.at[r, "text"]), "chosen_index": c, "rejected_index": r,
                         "chosen_seed": _seed(by_index.at[c, "seed"]), "rejected_seed": _seed(by_index.at[r, "seed"]),
                         "model": model, "settings": _plain(settings)})
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def _indices(items: Iterable[int], n: int, name: str) -> list[int]:
    """Distinct choice indices in the order given, each in 0..n-1."""
    out = []
    for i in items:
        if isinstance(i, bool) or not float(i).is_integer():
            raise TypeError(f"{name}: choice indices must be integers, got {i!r}")
        if not 0 <= int(i) < n:
            raise ValueError(f"{name}: there is no choice {int(i)} among {n}")
        if int(i) not in out:
            out.append(int(i))
    return out


def _prompt_form(prompt):
    """The prompt column's value, and how an answer's text becomes the chosen/rejected value."""
    if isinstance(prompt, str):
        return prompt, str
    if isinstance(prompt, Chat):
        messages, started = list(prompt.messages), ""
        if prompt.continue_final_message and messages and messages[-1].get("role") == "assistant":
            started = messages.pop()["content"]
        return _messages(messages), lambda text: [{"role": "assistant", "content": started + text}]
    if isinstance(prompt, list) and prompt and all(isinstance(m, dict) for m in prompt):
        return _messages(prompt), lambda text: [{"role": "assistant", "content": text}]
    raise TypeError(f"the prompt must be text or chat messages for preference pairs, got {type(prompt).__name__}")


def _messages(messages: list[dict]) -> list[dict]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def _seed(value):
    return None if value is None or pd.isna(value) else int(value)


def _plain(settings: dict | None) -> dict | None:
    """Settings as JSON values (tuples as lists)."""
    if settings is None:
        return None
    return {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()}
