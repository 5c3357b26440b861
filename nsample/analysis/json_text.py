"""JSON in model output: parsed leniently (bare, in ``` fences, or the first {...} or [...] amid text), and paths."""
import json
import re

FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
MISSING = object()


def parse_json(text: str):
    """The JSON value a model wrote: the whole text, else a fenced block, else the first object or array in it.

    Raises ValueError (json.JSONDecodeError) saying why when no reading works.
    """
    try:
        return json.loads(text)
    except ValueError as whole_error:
        error = whole_error
    for block in FENCE.findall(text):
        try:
            return json.loads(block)
        except ValueError:
            pass
    decoder = json.JSONDecoder()
    for opener in "{[":
        start = text.find(opener)
        if start >= 0:
            try:
                return decoder.raw_decode(text, start)[0]
            except ValueError:
                pass
    raise error


def json_path(value, path: str):
    """The field at a dotted path ('result.value', 'items.0.name'; '' is the whole value), or MISSING."""
    for key in path.split(".") if path else []:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and re.fullmatch(r"-?\d+", key) and -len(value) <= int(key) < len(value):
            value = value[int(key)]
        else:
            return MISSING
    return value


def json_answer(text: str, path: str) -> str | None:
    """The field as an answer: strings as they are, other values as compact JSON; None if unparsable or absent."""
    try:
        value = json_path(parse_json(text), path)
    except ValueError:
        return None
    if value is MISSING:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
