"""Numbers in model output: digits with signs, decimals and thousands separators, small numbers in words."""
import re
from decimal import Decimal, InvalidOperation

# a sign only where it cannot be a hyphen between words or numbers: "3-4" is 3 and 4, "x = -5" is -5
DIGITS = re.compile(r"(?<![\w.])[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")
WORD = re.compile(r"[A-Za-z]+")
SEPARATORS = re.compile(r"[\s-]*")
UNITS = {word: value for value, word in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
     "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"])}
TENS = {word: 10 * value for value, word in enumerate(
    ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], start=2)}
SCALES = ("hundred", "thousand")
SIGNS = ("minus", "negative")
NUMBER_WORDS = {*UNITS, *TENS, *SCALES, *SIGNS}
MAX_PLAIN_EXPONENT = 30  # beyond this a number keeps scientific notation instead of growing into a long string


def canonical_number(text: str) -> str | None:
    """One spelling per value: '42', '42.0', '+42' and '42.' give '42'; '1,234.50' gives '1234.5'; else None."""
    cleaned = text.strip().replace(",", "").replace("\u2212", "-")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    if value.is_zero():
        return "0"
    value = value.normalize()
    return str(value) if abs(value.adjusted()) > MAX_PLAIN_EXPONENT else format(value, "f")


def digit_numbers(text: str) -> list[str]:
    """The numbers written in digits, in order, as canonical strings."""
    spans = (m.group() for m in DIGITS.finditer(text) if any(ch.isdigit() for ch in m.group()))
    return [number for number in map(canonical_number, spans) if number is not None]


def word_numbers(text: str) -> list[str]:
    """The numbers spelled in English words, zero to 999,999 ('forty-two', 'one hundred and five'), in order.

    The word2number package is not a dependency, so this small parser covers how answers are usually spelled.
    """
    return [str(number) for run in _word_runs(text) for number in _parse_run(run)]


def last_number(text: str) -> str | None:
    """The last number in digits; where there is none, the last number in words (so 'the one' cannot beat 42)."""
    found = digit_numbers(text) or word_numbers(text)
    return found[-1] if found else None


def _word_runs(text: str) -> list[list[str]]:
    """Maximal runs of number words joined only by spaces or hyphens ('and' may join inside a run)."""
    runs, run, end = [], [], 0
    for match in WORD.finditer(text):
        word = match.group().lower()
        if run and not SEPARATORS.fullmatch(text[end:match.start()]):
            runs.append(run)
            run = []
        if word in NUMBER_WORDS or (word == "and" and run):
            run.append(word)
            end = match.end()
        elif run:
            runs.append(run)
            run = []
    return runs + [run] if run else runs


def _parse_run(words: list[str]) -> list[int]:
    """The numbers of one run, split where one number ends and the next begins ('two three' is 2 and 3)."""
    numbers, sign, total, current, last = [], 1, 0, 0, None
    for word in words:
        if word in SIGNS or (word == "and" and last not in SCALES):
            if last is not None:
                numbers.append(sign * (total + current))
            sign, total, current, last = (-1 if word in SIGNS else 1), 0, 0, None
            continue
        if word == "and":
            continue
        if last is not None and not _continues(word, current, total, last):
            numbers.append(sign * (total + current))
            sign, total, current = 1, 0, 0
        if word in UNITS or word in TENS:
            current += UNITS.get(word, TENS.get(word, 0))
        elif word == "hundred":
            current = max(current, 1) * 100
        else:
            total, current = max(current, 1) * 1000, 0
        last = "unit" if word in UNITS else "tens" if word in TENS else word
    if last is not None:
        numbers.append(sign * (total + current))
    return numbers


def _continues(word: str, current: int, total: int, last: str) -> bool:
    """Whether `word` extends the number read so far rather than starting a new one."""
    if word in UNITS:
        return last in SCALES or (last == "tens" and UNITS[word] < 10)
    if word in TENS:
        return last in SCALES
    if word == "hundred":
        return last in ("unit", "tens") and 0 < current < 100
    return total == 0 and current > 0 and last != "thousand"
