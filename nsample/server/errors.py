"""The one place where failures become OpenAI error bodies: {"error": {"message", "type", "param", "code"}}.

Engine errors (NSampleError) keep their own status, param and code; pydantic validation errors and malformed JSON
become 400 invalid_request_error with the offending parameter named the way OpenAI names it ("messages.[0].role");
a body the JSON parser gives up on (nested too deeply, a number too long, not UTF-8) is a 400 invalid_json saying
why; HTTP errors (401, 404, 405, 408, 413) keep their status; anything unexpected is a 500 server_error. Bad input
never reaches a 500.
"""
import logging
import sys

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from nsample.errors import InvalidRequest, NSampleError, check_text

log = logging.getLogger("nsample.server")

TYPES = {"str": "a string", "string": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
         "list": "an array", "dict": "an object", "model": "an object", "model_attributes": "an object", "none": "null"}
UNION_SCALARS = {"str", "int", "float", "bool"}
HTTP_CODES = {401: "invalid_api_key", 404: "not_found", 405: "method_not_allowed", 408: "request_timeout",
              413: "request_too_large"}


def error_response(err: NSampleError, retry_after_s: int = 1, headers: dict | None = None) -> JSONResponse:
    headers = dict(headers or {})
    if err.status == 429:
        headers["Retry-After"] = str(retry_after_s)
    return JSONResponse(err.to_dict(), status_code=err.status, headers=headers)


def http_error(status: int, message: str) -> NSampleError:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return NSampleError(message, code=HTTP_CODES.get(status), type=kind, status=status)


def server_error(e: BaseException) -> NSampleError:
    log.exception("internal error", exc_info=e)
    return NSampleError(f"The server had an error while processing your request ({type(e).__name__}).",
                        type="server_error", code="internal_error", status=500)


def unparsed(cause: BaseException) -> InvalidRequest:
    """The error for a body that FastAPI's json.loads refused with something other than a syntax error."""
    if isinstance(cause, RecursionError):
        why = "it is nested too deeply"
    elif isinstance(cause, UnicodeDecodeError):
        why = f"it is not UTF-8 ({cause.reason} at byte {cause.start})"
    elif isinstance(cause, ValueError) and "integer string conversion" in str(cause):
        why = f"a number has more than {sys.get_int_max_str_digits()} digits"
    else:
        why = str(cause) or type(cause).__name__
    return InvalidRequest(f"We could not parse the JSON body of your request: {why}.", code="invalid_json")


def from_validation(errors: list[dict]) -> InvalidRequest:
    """The first pydantic error as an OpenAI error; union members at the same place are summed up together."""
    unreadable = next((e for e in errors if e["type"] == "string_unicode"), None)
    if unreadable is not None:  # a key pydantic cannot read: a lone surrogate, wherever it is in a union
        try:
            check_text(unreadable["input"], _param(_strip(unreadable["loc"])), "a key")
        except InvalidRequest as bad:
            return bad
    e = errors[0]
    loc = list(e["loc"][1:] if e["loc"][:1] == ("body",) else e["loc"])
    kind, param, in_union = e["type"], _param(loc), any(_is_union_tag(p) for p in loc)
    if kind == "json_invalid":
        return InvalidRequest(f"We could not parse the JSON body of your request: {e.get('ctx', {}).get('error')} "
                              f"(at character {loc[0] if loc else 0}).", code="invalid_json")
    if param is None:
        return InvalidRequest("The request body must be a JSON object, sent with 'Content-Type: application/json'.",
                              code="invalid_json")
    if kind == "missing":
        return InvalidRequest(f"Missing required parameter: '{param}'.", param=param,
                              code="missing_required_parameter")
    if kind == "extra_forbidden":
        return InvalidRequest(f"Unrecognized request argument supplied: {param}", param=param,
                              code="unknown_parameter")
    if in_union:
        tags = [p for err in errors if _param(_strip(err["loc"])) == param for p in err["loc"] if _is_union_tag(p)]
        *most, last = [_describe(t) for t in dict.fromkeys(tags)]
        want = f"{', '.join(most)} or {last}" if most else last
        return InvalidRequest(f"Invalid type for '{param}': expected {want}.", param=param, code="invalid_type")
    if kind.endswith(("_type", "_parsing")):
        want = TYPES.get(kind.rsplit("_", 1)[0], kind)
        return InvalidRequest(f"Invalid type for '{param}': expected {want}, but got {_kind(e.get('input'))} "
                              f"instead.", param=param, code="invalid_type")
    if kind == "literal_error":
        return InvalidRequest(f"Invalid value: {e.get('input')!r}. Supported values are: {e['ctx']['expected']}.",
                              param=param, code="invalid_value")
    if kind == "too_short" and e.get("ctx", {}).get("actual_length") == 0:
        return InvalidRequest(f"Invalid '{param}': empty array. Expected an array with minimum length "
                              f"{e['ctx']['min_length']}, but got an empty array instead.", param=param,
                              code="empty_array")
    return InvalidRequest(f"Invalid '{param}': {e['msg']}.", param=param, code="invalid_value")


def install(app: FastAPI, retry_after_s: int) -> None:
    """Register the handlers that turn every failure into an OpenAI error body."""

    @app.exception_handler(NSampleError)
    async def _nsample(_: Request, e: NSampleError):
        return error_response(e, retry_after_s)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, e: RequestValidationError):
        return error_response(from_validation(list(e.errors())))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, e: HTTPException):
        if e.status_code == 400 and e.__cause__ is not None:  # FastAPI's "There was an error parsing the body"
            return error_response(unparsed(e.__cause__))
        message = e.detail if e.status_code != 404 else f"Not found: {request.method} {request.url.path}"
        return error_response(http_error(e.status_code, str(message)), headers=e.headers)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, e: Exception):
        return error_response(server_error(e))


def _strip(loc) -> list:
    return list(loc[1:] if loc[:1] == ("body",) else loc)


def _is_union_tag(p) -> bool:
    """pydantic puts the union member's type ("str", "list[int]") into the location of an error inside a union."""
    return isinstance(p, str) and ("[" in p or p in UNION_SCALARS)


def _describe(tag: str, plural: bool = False) -> str:
    """A union member's type in words: "list[list[int]]" -> "an array of arrays of integers"."""
    if tag.startswith("list["):
        return ("arrays of " if plural else "an array of ") + _describe(tag[5:-1], True)
    words = {"str": ("a string", "strings"), "int": ("an integer", "integers"), "float": ("a number", "numbers"),
             "bool": ("a boolean", "booleans")}
    return words.get(tag, ("an object", "objects"))[plural]


def _param(loc: list) -> str | None:
    parts = []
    for p in loc:
        if _is_union_tag(p):
            break
        parts.append(f"[{p}]" if isinstance(p, int) else str(p))
    return ".".join(parts) or None


def _kind(v) -> str:
    names = {bool: "a boolean", str: "a string", int: "an integer", float: "a decimal", list: "an array",
             dict: "an object", type(None): "null"}
    return names.get(type(v), type(v).__name__)
