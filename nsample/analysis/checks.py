"""Checks: whether each choice passes (an expected answer, a regex, valid JSON, a function), as pass/fail/error."""
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import jsonschema
import numpy as np
import pandas as pd

from nsample.analysis.answers import normalize_expected
from nsample.analysis.extractors import Extract, answer_key, extractor
from nsample.analysis.inputs import Choices, choices_frame
from nsample.analysis.json_text import parse_json

RESULTS = ("pass", "fail", "error")
CHECK_COLUMNS = ["index", "seed", "text", "result", "detail"]


@dataclass(frozen=True)
class Verdict:
    """One choice's result ("pass", "fail" or "error") and why: what failed, or the exception."""

    result: str
    detail: str = ""


@dataclass(frozen=True)
class Expected:
    """Passes when the extracted answer equals `answer`, both normalised alike ("forty-two" equals 42.0)."""

    answer: str
    extract: Extract = "text"

    def __post_init__(self):
        extractor(self.extract)  # an invalid regex is a ValueError now, not n errors later

    @property
    def name(self) -> str:
        return f"expected {self.answer!r} ({extractor(self.extract).name})"

    def verdict(self, text: str) -> Verdict:
        found = extractor(self.extract)(text)
        if found is None:
            return Verdict("fail", f"no answer ({extractor(self.extract).name})")
        if answer_key(found) == normalize_expected(self.answer, self.extract):
            return Verdict("pass")
        return Verdict("fail", f"answer {found!r}, expected {self.answer!r}")

    def __call__(self, text: str) -> bool:
        return self.verdict(text).result == "pass"


@dataclass(frozen=True)
class Matches:
    """Passes when the regex matches anywhere in the text (re.search)."""

    regex: str
    flags: int = 0
    pattern: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        try:
            object.__setattr__(self, "pattern", re.compile(self.regex, self.flags))
        except re.error as error:
            raise ValueError(f"invalid regex {self.regex!r}: {error}") from None

    @property
    def name(self) -> str:
        return f"matches {self.regex!r}"

    def verdict(self, text: str) -> Verdict:
        return Verdict("pass") if self.pattern.search(text) else Verdict("fail", f"no match for {self.regex!r}")

    def __call__(self, text: str) -> bool:
        return self.verdict(text).result == "pass"


@dataclass(frozen=True)
class ValidJSON:
    """Passes when the text holds JSON (bare, fenced or amid text) valid against the JSON Schema, if one is given.

    The schema is a dict or its JSON text; one that is not a valid JSON Schema is a ValueError.
    """

    schema: dict | bool | str | None = None
    validator: object = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        schema = self.schema
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as error:
                raise ValueError(f"the JSON schema is not JSON: {error}") from None
        validator = None
        if schema is not None:
            cls = jsonschema.validators.validator_for(schema)
            try:
                cls.check_schema(schema)
            except jsonschema.SchemaError as error:
                raise ValueError(f"invalid JSON schema: {error.message}") from None
            validator = cls(schema)
        object.__setattr__(self, "validator", validator)

    @property
    def name(self) -> str:
        return "valid JSON" if self.validator is None else "valid JSON (schema)"

    def verdict(self, text: str) -> Verdict:
        try:
            value = parse_json(text)
        except ValueError as error:
            return Verdict("fail", f"not JSON: {error}")
        if self.validator is None:
            return Verdict("pass")
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if error is None:
            return Verdict("pass")
        where = "/".join(str(part) for part in error.absolute_path)
        return Verdict("fail", f"schema: {error.message}" + (f" at {where}" if where else ""))

    def __call__(self, text: str) -> bool:
        return self.verdict(text).result == "pass"


@dataclass(frozen=True)
class FunctionCheck:
    """A Python callable check(text) -> bool run in this process; True passes, False fails, anything else errs."""

    function: Callable[[str], bool]

    @property
    def name(self) -> str:
        return getattr(self.function, "__name__", repr(self.function))

    def verdict(self, text: str) -> Verdict:
        outcome = self.function(text)
        if isinstance(outcome, bool | np.bool_):
            return Verdict("pass") if outcome else Verdict("fail", f"{self.name} returned False")
        return Verdict("error", f"{self.name} returned {outcome!r}, not True or False")

    def __call__(self, text: str) -> bool:
        return self.verdict(text).result == "pass"


def as_check(check):
    """A check object (with name and verdict(text)); a plain callable is wrapped as a FunctionCheck."""
    if hasattr(check, "verdict") and hasattr(check, "name"):
        return check
    if callable(check):
        return FunctionCheck(check)
    raise TypeError(f"a check is Expected, Matches, ValidJSON, CodeCheck or a callable(text) -> bool, "
                    f"got {type(check).__name__}")


def run_checks(data: Choices, check) -> pd.DataFrame:
    """Each choice checked: index, seed, text, result ("pass", "fail" or "error") and detail (why, or the error).

    A check that raises marks that choice "error" with the exception as detail; it never stops the others.
    attrs: check (its name), n, passed, failed and errors (counts).
    """
    frame = choices_frame(data)
    check = as_check(check)
    texts = frame["text"].fillna("").astype(str).tolist()
    verdicts = check.verdicts(texts) if hasattr(check, "verdicts") else [safe_verdict(check, t) for t in texts]
    table = pd.DataFrame({"index": frame["index"], "seed": frame["seed"], "text": texts,
                          "result": [v.result for v in verdicts], "detail": [v.detail for v in verdicts]},
                         columns=CHECK_COLUMNS)
    counts = table["result"].value_counts()
    table.attrs.update(check=check.name, n=len(table), passed=int(counts.get("pass", 0)),
                       failed=int(counts.get("fail", 0)), errors=int(counts.get("error", 0)))
    return table


def safe_verdict(check, text: str) -> Verdict:
    """The check's verdict on one text; an exception is an "error" verdict naming it."""
    try:
        verdict = check.verdict(text)
    except Exception as error:  # noqa: BLE001 - a failing check marks its choice "error", never stops the run
        return Verdict("error", f"{type(error).__name__}: {error}")
    if not isinstance(verdict, Verdict) or verdict.result not in RESULTS:
        return Verdict("error", f"{check.name} gave {verdict!r}, not a Verdict")
    return verdict


def results_of(checked: pd.DataFrame) -> Sequence[str]:
    """The result column of a run_checks() table, validated."""
    if "result" not in checked.columns:
        raise ValueError("expected a run_checks() table with a 'result' column")
    bad = sorted(set(checked["result"]) - set(RESULTS))
    if bad:
        raise ValueError(f"results must be pass, fail or error; found {bad}")
    return checked["result"].tolist()
