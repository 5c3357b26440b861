"""Errors as values that the server maps to the OpenAI error body in one place, and the one check for text that
is not Unicode.

Lone surrogates: JSON may escape half of a UTF-16 surrogate pair ("\\ud800"), and a JSON parser hands it on as a
string that no UTF-8 encoder, tokenizer or page accepts. nsample refuses such text with a 400 wherever text comes in
(the API's protocol layer, the library's prompts and sampling parameters, the page's boxes), as OpenAI does, rather
than replacing it: a silently changed prompt or stop string would change every choice (check_text).
"""
import re
from dataclasses import dataclass

LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins whole pairs, so what is left here is unpaired


@dataclass
class NSampleError(Exception):
    """An error a caller can act on: OpenAI's {message, type, param, code} plus an HTTP status."""

    message: str
    param: str | None = None
    code: str | None = None
    type: str = "invalid_request_error"
    status: int = 400

    def __post_init__(self):
        super().__init__(self.message)

    def to_dict(self) -> dict:
        """The OpenAI error body; a lone surrogate echoed from the request shows escaped, so the body stays UTF-8."""
        return {"error": {"message": _utf8(self.message), "type": self.type, "param": _utf8(self.param),
                          "code": self.code}}


class InvalidRequest(NSampleError):
    """Bad input: 400, invalid_request_error."""


class ModelNotFound(NSampleError):
    def __init__(self, model: str):
        super().__init__(f"The model '{model}' does not exist.", param="model", code="model_not_found",
                         status=404)


class QueueFull(NSampleError):
    def __init__(self, limit: int, per_client: bool = False):
        whose = "of yours are" if per_client else "are"
        super().__init__(f"The server is busy: {limit} requests {whose} already waiting or running. Retry shortly.",
                         code="queue_full", type="rate_limit_error", status=429)


class ModelMissing(NSampleError):
    """A model that cannot be loaded (package missing, bad path)."""

    def __init__(self, message: str):
        super().__init__(message, param="model", code="model_unavailable", type="server_error", status=500)


def check_text(text: str, param: str | None, what: str = "the text") -> str:
    """`text` unchanged, or InvalidRequest (400 invalid_value naming `param`) if it holds a lone surrogate."""
    found = LONE_SURROGATE.search(text)
    if found is None:
        return text
    where = f"'{param}'" if param else "request"
    raise InvalidRequest(f"Invalid {where}: {what} holds a lone surrogate (U+{ord(found.group()):04X} at character "
                         f"{found.start()}), half of a UTF-16 pair and not a character. Send text as UTF-8, or escape "
                         f"only whole pairs (\\ud83d\\ude00).", param=param, code="invalid_value")


def _utf8(text: str | None) -> str | None:
    return None if text is None else text.encode("utf-8", "backslashreplace").decode()
