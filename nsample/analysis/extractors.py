"""Answer extractors: named presets, a user regex or any callable, each giving a tidy answer or None."""
import re
from collections.abc import Callable
from dataclasses import dataclass

from nsample.analysis.json_text import json_answer
from nsample.analysis.numbers import canonical_number, last_number

PRESETS = ("last number", "boxed", "answer", "choice letter", "first line", "json:", "text")
"""Preset names; "json:" takes a field path after the colon ("json:result.value"); bare, it is the whole JSON."""

ANSWER_LINE = re.compile(r"(?:(?<![A-Za-z])answer(?:\s+is)?\s*:|####)[ \t]*(.*)", re.IGNORECASE)
LETTER_AFTER_ANSWER = re.compile(r"(?<![A-Za-z])(?i:answer|option|choice)(?:\s+is)?\s*[:=]?\s*\(?([A-E])\b")
LEADING_LETTER = re.compile(r"^[\s*]*\(?([A-E])(?:[).:\]*]|\s*$)")
PARENTHESISED_LETTER = re.compile(r"\(([A-E])\)")
BOXED = "\\boxed{"
EDGE_MARKUP = "*_`"
FINAL_PUNCTUATION = ".!?,;:"

Extract = str | re.Pattern | Callable[[str], str | None]


@dataclass(frozen=True)
class Extractor:
    """A named function from a choice's text to its answer (tidied), or None when the text has no answer."""

    name: str
    function: Callable[[str], object]

    def __call__(self, text: str) -> str | None:
        answer = self.function(text)
        return None if answer is None else tidy(str(answer))


def extractor(extract: "Extract | Extractor") -> Extractor:
    """The extractor a spec names: a preset, 'json:<path>', a regex (string or compiled), or a callable.

    A regex gives its first match: group 1 when it has groups, else the whole match. Any string that is not a
    preset is compiled as a regex, so an invalid one is a ValueError naming it.
    """
    if isinstance(extract, Extractor):
        return extract
    if callable(extract):
        return Extractor(getattr(extract, "__name__", repr(extract)), extract)
    if isinstance(extract, re.Pattern):
        return Extractor(f"regex: {extract.pattern}", _regex_function(extract))
    if not isinstance(extract, str):
        raise TypeError(f"extract must be a preset name, a regex or a callable, got {type(extract).__name__}")
    if extract.startswith("json:"):
        path = extract.removeprefix("json:").strip()
        return Extractor(extract, lambda text: json_answer(text, path))
    if extract in _PRESET_FUNCTIONS:
        return Extractor(extract, _PRESET_FUNCTIONS[extract])
    try:
        pattern = re.compile(extract)
    except re.error as error:
        raise ValueError(f"extract {extract!r} is not a preset ({', '.join(PRESETS)}) and not a valid regex: "
                         f"{error}") from None
    return Extractor(f"regex: {extract}", _regex_function(pattern))


def tidy(answer: str) -> str | None:
    """Whitespace collapsed, markdown emphasis and final punctuation dropped, numbers in one spelling; '' is None."""
    answer = " ".join(answer.split()).strip(EDGE_MARKUP).strip()
    while answer and answer[-1] in FINAL_PUNCTUATION:
        answer = answer[:-1].rstrip().rstrip(EDGE_MARKUP)
    if not answer:
        return None
    return canonical_number(answer) or answer


def answer_key(answer: str) -> str:
    """What makes two answers the same: the tidy answer ignoring case, so 'Paris' and 'paris.' agree."""
    tidied = tidy(answer)
    return "" if tidied is None else tidied.casefold()


def boxed(text: str) -> str | None:
    """The content of the last complete \\boxed{...}, nested braces included."""
    found, start = None, text.find(BOXED)
    while start >= 0:
        depth, position = 1, start + len(BOXED)
        while position < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[position], 0)
            position += 1
        if depth == 0:
            found = text[start + len(BOXED):position - 1]
        start = text.find(BOXED, start + 1)
    return found


def after_answer(text: str) -> str | None:
    """The rest of the line after the last 'Answer:' or '####'; the next non-empty line when that is empty."""
    matches = list(ANSWER_LINE.finditer(text))
    if not matches:
        return None
    rest = matches[-1].group(1).strip()
    if rest:
        return rest
    following = text[matches[-1].end():].strip()
    return following.splitlines()[0] if following else None


def choice_letter(text: str) -> str | None:
    """A multiple-choice letter A-E: after 'Answer'/'Option' (last), else leading 'B.'/'(B)', else the last '(B)'."""
    after = LETTER_AFTER_ANSWER.findall(text)
    if after:
        return after[-1]
    leading = LEADING_LETTER.match(text)
    if leading:
        return leading.group(1)
    parenthesised = PARENTHESISED_LETTER.findall(text)
    return parenthesised[-1] if parenthesised else None


def first_line(text: str) -> str | None:
    """The first line that is not blank."""
    return next((line for line in text.splitlines() if line.strip()), None)


def whole_text(text: str) -> str | None:
    """The whole text, tidied and lowercased."""
    tidied = tidy(text)
    return None if tidied is None else tidied.casefold()


def _regex_function(pattern: re.Pattern) -> Callable[[str], str | None]:
    def first_match(text: str) -> str | None:
        match = pattern.search(text)
        if match is None:
            return None
        return match.group(1) if pattern.groups else match.group()

    return first_match


_PRESET_FUNCTIONS = {"last number": last_number, "boxed": boxed, "answer": after_answer,
                     "choice letter": choice_letter, "first line": first_line, "text": whole_text}
