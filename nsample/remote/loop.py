"""An asyncio event loop on its own daemon thread, so a synchronous API can drive async I/O."""
import asyncio
import threading


class LoopThread:
    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro, timeout: float | None = None):
        """Run `coro` on the loop and wait for its result (from any thread but the loop's own)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn, *args) -> None:
        """Call fn(*args) on the loop soon (thread-safe)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def close(self, timeout: float = 10) -> None:
        """Stop the loop and its thread (cancel and await its tasks first: see RemoteEngine.close)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
