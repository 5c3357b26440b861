"""Upstream failures as NSampleErrors: 502 when the upstream fails, its own 4xx when it rejects the request."""
import json

import httpx

from nsample.errors import NSampleError


class UpstreamError(NSampleError):
    """The upstream server is unreachable, failed or answered nonsense: 502 (504 for a timeout), upstream_error."""

    def __init__(self, message: str, code: str = "upstream_error", status: int = 502):
        super().__init__(message, code=code, type="upstream_error", status=status)


def _message(body: str) -> tuple[str, dict]:
    """The upstream's error message and its error object ({} when the body is not OpenAI's error shape)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:500] or "(empty body)", {}
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        msg = err.get("message") or err.get("detail") or err.get("error") or json.dumps(data)[:500]
        return str(msg), err
    return str(err)[:500], {}


def from_status(url: str, status: int, body: str) -> NSampleError:
    """The error for an upstream answer with `status` >= 400."""
    msg, err = _message(body)
    if status in (401, 403):  # nsample's own key for the upstream is wrong: not the client's fault
        return UpstreamError(f"The upstream {url} refused nsample's credentials ({status}): {msg}",
                             code="upstream_auth")
    if 400 <= status < 500:
        param, code = err.get("param"), err.get("code")
        return NSampleError(msg, param=param if isinstance(param, str) else None,
                            code=str(code) if code is not None else None,
                            type=err.get("type") if isinstance(err.get("type"), str) else "invalid_request_error",
                            status=status)
    return UpstreamError(f"The upstream {url} failed ({status}): {msg}")


def from_exception(url: str, e: Exception) -> NSampleError:
    """The error for a transport failure (refused, reset, timed out) or an unreadable answer."""
    if isinstance(e, NSampleError):
        return e
    if isinstance(e, httpx.TimeoutException):
        return UpstreamError(f"The upstream {url} did not answer in time ({type(e).__name__}); raise "
                             f"--upstream-timeout if it is just slow.", code="upstream_timeout", status=504)
    if isinstance(e, httpx.ConnectError):
        return UpstreamError(f"The upstream {url} is unreachable: {e or type(e).__name__}",
                             code="upstream_unreachable")
    if isinstance(e, httpx.HTTPError):
        return UpstreamError(f"The upstream {url} connection failed: {e or type(e).__name__}")
    return UpstreamError(f"The upstream {url} sent an answer nsample cannot read: {type(e).__name__}: {e}")
