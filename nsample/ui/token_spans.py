"""A card's text as clickable spans that know where they end: one per token with its probability (when logprobs
came back) or one per word. A click on a span picks the branch point; the probability drives the shading."""
import difflib
import math
import re
from html import escape

from nsample.outputs import TokenLogprob

WORD = re.compile(r"\s*\S+\s*|\s+")


def token_segments(text: str, logprobs: list[TokenLogprob]) -> list[tuple[int, int, float | None]]:
    """(start, end, probability) per token of `text`; split characters and cut stops are aligned by difflib."""
    return [(start, end, None if i is None else _probability(logprobs[i].logprob))
            for start, end, i in token_runs(text, logprobs)]


def token_runs(text: str, logprobs: list[TokenLogprob]) -> list[tuple[int, int, int | None]]:
    """(start, end, token index) per token of `text`, aligned as token_segments says."""
    joined = "".join(t.token for t in logprobs)
    owner = [i for i, t in enumerate(logprobs) for _ in t.token]  # token index of each joined character
    if joined.startswith(text):
        chars = owner[:len(text)]
    else:
        chars = [None] * len(text)
        matcher = difflib.SequenceMatcher(None, joined, text, autojunk=False)
        for block in matcher.get_matching_blocks():
            chars[block.b:block.b + block.size] = owner[block.a:block.a + block.size]
        for j in range(len(chars)):  # an unmatched character belongs to the token before it (or after it)
            if chars[j] is None:
                chars[j] = chars[j - 1] if j else next((c for c in chars if c is not None), None)
    runs, start = [], 0
    for j in range(1, len(text) + 1):
        if j == len(text) or chars[j] != chars[start]:
            runs.append((start, j, chars[start]))
            start = j
    return runs


def word_segments(text: str) -> list[tuple[int, int, None]]:
    """(start, end, None) spans of `text`, one per word with the whitespace around it."""
    return [(m.start(), m.end(), None) for m in WORD.finditer(text)]


def spans_html(text: str, logprobs: list[TokenLogprob], cut: int | None = None) -> str:
    """Spans with data-end (where a click cuts), data-tok (the token's index, whose alternatives a click shows)
    and --p (probability); the part after `cut` is struck out."""
    runs = token_runs(text, logprobs) if logprobs else [(s, e, None) for s, e, _ in word_segments(text)]
    out = []
    for start, end, i in runs:
        p = None if i is None else _probability(logprobs[i].logprob)
        classes = "ns-tok" + (" ns-after-cut" if cut is not None and start >= cut else "")
        style = "" if p is None else f' style="--p:{p:.3f}" title="p = {p:.3f}"'
        tok = "" if i is None else f' data-tok="{i}" data-start="{start}"'
        out.append(f'<span class="{classes}" data-end="{end}"{tok}{style}>{escape(text[start:end])}</span>')
    return "".join(out)


def _probability(logprob: float) -> float | None:
    return None if math.isnan(logprob) else math.exp(logprob)
