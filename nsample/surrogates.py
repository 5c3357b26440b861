"""Lone surrogates: text that JSON can carry but Unicode cannot.

JSON may escape half of a UTF-16 surrogate pair ("\\ud800"), and a JSON parser hands it on as a string that no UTF-8
encoder, tokenizer or page accepts. nsample refuses such text with a 400 wherever text comes in (the API's protocol
layer, the library's prompts and sampling parameters, the page's boxes), as OpenAI does, instead of replacing it:
a silently changed prompt or stop string would change every choice. Text nsample relays rather than receives (a
remote upstream's answer) has them replaced by U+FFFD instead, since a 400 would blame the client for the upstream.
"""
import re

from nsample.errors import InvalidRequest

LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins whole pairs, so what is left here is unpaired


def check_text(text: str, param: str | None, what: str = "the text") -> str:
    """`text` unchanged, or InvalidRequest (400 invalid_value naming `param`) if it holds a lone surrogate."""
    found = LONE_SURROGATE.search(text)
    if found is None:
        return text
    where = f"'{param}'" if param else "request"
    raise InvalidRequest(f"Invalid {where}: {what} holds a lone surrogate (U+{ord(found.group()):04X} at character "
                         f"{found.start()}), half of a UTF-16 pair and not a character. Send text as UTF-8, or escape "
                         f"only whole pairs (\\ud83d\\ude00).", param=param, code="invalid_value")


def without_surrogates(value):
    """A parsed JSON value with each lone surrogate of its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value
