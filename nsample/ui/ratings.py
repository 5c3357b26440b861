"""A person's verdicts on a run's cards (👍 / 👎, best, a note), blind mode, and the session's preference pairs.

The pairs come from nsample.analysis.preference_pairs: best or 👍 against 👎 and unrated, per run, over every run
of the page session. Blind mode shuffles the cards by a seed drawn per run and hides what tells them apart (index,
seed, logprobs, sort) until a best card is picked.
"""
import json
from pathlib import Path

import pandas as pd

from nsample import analysis
from nsample.errors import check_text
from nsample.ui.run import Run
from nsample.ui.tree import RunTree

ACTIONS = ("up", "down", "best")
RATED_FINISH = ("stop", "length")  # a stopped or failed card's text is partial: no pairs from it


def hidden(run: Run | None) -> bool:
    """Whether `run` is blind and not yet revealed."""
    return run is not None and run.blind is not None and not run.blind.revealed


def rate(run: Run, index: int, action: str) -> bool:
    """Apply one click: 👍 / 👎 toggle (one or the other), best moves to `index` (or off if it was there). Picking
    a best card reveals a blind run. Returns whether the run was revealed by this click."""
    if action not in ACTIONS:
        raise ValueError(f"unknown rating {action!r}; one of {', '.join(ACTIONS)}")
    if not 0 <= index < len(run.cards):
        raise ValueError(f"there is no choice #{index} in this run")
    r = run.ratings
    if action == "best":
        r.best = None if r.best == index else index
        if r.best is not None and r.thumbs.get(index) == "down":
            del r.thumbs[index]
    elif r.thumbs.get(index) == action:
        del r.thumbs[index]
    else:
        r.thumbs[index] = action
        if action == "down" and r.best == index:
            r.best = None
    if action == "best" and r.best is not None and hidden(run):
        run.blind.revealed = True
        return True
    return False


def note(run: Run, index: int, text: str) -> None:
    if 0 <= index < len(run.cards):
        run.ratings.notes[index] = check_text(str(text or ""), "note", "the note").strip()


def sides(run: Run) -> tuple[list[int], list[int]]:
    """(chosen, rejected) choice indices: best and 👍 against 👎 and unrated; partial texts take no side."""
    r, whole = run.ratings, [c.index for c in run.cards if c.finish_reason in RATED_FINISH]
    chosen = [i for i in whole if r.best == i or r.thumbs.get(i) == "up"]
    rejected = [i for i in whole if i not in chosen]
    return (chosen, rejected) if chosen else ([], [])


def run_pairs(run: Run) -> pd.DataFrame:
    """This run's preference pairs (TRL DPO columns plus seeds, settings, run id and notes)."""
    chosen, rejected = sides(run)
    pairs = analysis.preference_pairs(run.to_dataframe(), chosen, rejected, prompt=run.spec.engine_prompt,
                                      settings=run.spec.sampling)
    notes = run.ratings.notes
    pairs["model"] = run.model
    pairs["run"] = run.id
    pairs["chosen_note"] = [notes.get(i, "") for i in pairs["chosen_index"]]
    pairs["rejected_note"] = [notes.get(i, "") for i in pairs["rejected_index"]]
    return pairs


def session_pairs(tree: RunTree | None) -> pd.DataFrame:
    """Every rated run's pairs, in the page's run order."""
    runs = [] if tree is None else [tree.runs[i] for _, i in tree.outline()]
    frames = [run_pairs(r) for r in runs if r.ended and sides(r)[0]]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def write_pairs(tree: RunTree | None, folder: str | Path) -> tuple[Path | None, int]:
    """The session's pairs as JSONL (one TRL row a line) in `folder`; (None, 0) when there are none."""
    pairs = session_pairs(tree)
    if pairs.empty:
        return None, 0
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nsample-preference-pairs.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in pairs.to_dict("records")))
    return path, len(pairs)
