"""The door of /v1/*: the API key, the body-size limit and the body's deadline, before any route runs."""
import asyncio
import hmac

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException

from nsample.server import errors

CLOSE = {"Connection": "close"}  # after a refused or late body the connection is not reused


class Guard:
    """ASGI middleware for /v1/*: 401 without the configured API key; 413 for a body over max_body_bytes; 408 for a
    body that has not arrived within body_timeout_s (a client sending it a byte at a time holds nothing for long)."""

    def __init__(self, app, api_key: str | None, max_body_bytes: int, body_timeout_s: float):
        self.app, self.api_key, self.limit, self.timeout = app, api_key, max_body_bytes, body_timeout_s

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        if self.api_key is not None and not self._authorized(headers.get("authorization")):
            missing = "authorization" not in headers
            message = ("You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'." if missing
                       else "Incorrect API key provided.")
            response = errors.error_response(errors.http_error(401, message), headers={"WWW-Authenticate": "Bearer"})
            return await response(scope, receive, send)
        seen, complete, deadline = 0, False, asyncio.get_running_loop().time() + self.timeout

        async def timed_receive():
            try:
                return await asyncio.wait_for(receive(), deadline - asyncio.get_running_loop().time())
            except asyncio.TimeoutError:
                raise HTTPException(408, f"The request body did not arrive within {self.timeout:g} s.",
                                    headers=CLOSE) from None

        async def drain() -> None:
            """Read and drop the rest of a refused body (within the deadline), so the client can read the answer."""
            message = {"more_body": True}
            while message.get("more_body", False):
                message = await timed_receive()

        async def limited_receive():
            nonlocal seen, complete
            if complete:  # the body is in: what follows is the disconnect, whenever it comes
                return await receive()
            message = await timed_receive()
            seen += len(message.get("body", b""))
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            if seen > self.limit:
                if not complete:
                    await drain()
                raise HTTPException(413, self._too_large(), headers=CLOSE)
            return message

        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.limit:
            try:
                await drain()
                error = errors.http_error(413, self._too_large())
            except HTTPException as e:
                error = errors.http_error(e.status_code, e.detail)
            return await errors.error_response(error, headers=CLOSE)(scope, receive, send)
        await self.app(scope, limited_receive, send)

    def _authorized(self, header: str | None) -> bool:
        scheme, _, token = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.api_key.encode())

    def _too_large(self) -> str:
        return f"The request body is too large: the limit is {self.limit} bytes."
