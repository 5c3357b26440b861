"""Errors as values that the server maps to the OpenAI error body in one place."""
from dataclasses import dataclass


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


def _utf8(text: str | None) -> str | None:
    return None if text is None else text.encode("utf-8", "backslashreplace").decode()
