"""Connections that cannot be held open for nothing: a deadline for each request's head, and how uvicorn runs.

uvicorn closes an idle keep-alive connection, but a client that connects and then sends its request head slowly,
or never, keeps the connection (and a file descriptor) forever. Here the head must arrive within the request
timeout of the connection opening or of the previous response; the body's deadline is the API's Guard (408).
"""
import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from nsample.server.config import ServerConfig


def with_head_deadline(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request head is not complete within `seconds`."""

    class HeadDeadline(H11Protocol):
        _deadline = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE and self._deadline is not None:  # the head is in
                self._deadline.cancel()
                self._deadline = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request's head, on a kept-alive connection

        def connection_lost(self, exc) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                if self._deadline is not None:
                    self._deadline.cancel()
                self._deadline = self.loop.call_later(seconds, self._expire)

        def _expire(self) -> None:
            self._deadline = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return HeadDeadline


def uvicorn_options(config: ServerConfig) -> dict:
    """What `nsample serve` and app.py pass to uvicorn.run."""
    return {"host": config.host, "port": config.port, "log_level": config.log_level,
            "http": with_head_deadline(config.request_timeout_s)}
