"""Who runs next: the waiting queue, admission against one shared KV budget, per-client fairness, cancellation.

Every running request is in every decode step, so a request with n=16 and one with n=1 both progress each
step. Admission takes clients in turn (round robin over clients, first come first served within one), so a
flood of requests from one client cannot push another client's request to the back of the queue. Each
admitted request reserves its worst-case KV cache (the prompt once plus rows x max_new tokens) against a
budget shared by all running requests; what does not fit yet waits, in order, until memory is released.
"""
import contextlib
import threading
from collections import OrderedDict, deque

from nsample.config import EngineConfig
from nsample.errors import QueueFull
from nsample.request import Request


class Scheduler:
    def __init__(self, config: EngineConfig, budget_bytes: int):
        self.config, self.budget = config, budget_bytes
        self.waiting: OrderedDict[str | None, deque[Request]] = OrderedDict()  # per client, in turn order
        self.running: list[Request] = []
        self.need: dict[Request, int] = {}  # each queued or running request's KV reservation, in bytes
        self.reserved = 0  # bytes reserved by running requests
        self.closed = False
        self._cv = threading.Condition()

    def add(self, req: Request, need_bytes: int) -> None:
        """Queue a request (it must fit the budget alone); refuse it when the queue or its client's share is full."""
        with self._cv:
            if self.closed:
                raise RuntimeError("the engine is closed")
            if len(self.need) >= self.config.max_queue:
                raise QueueFull(self.config.max_queue)
            if req.client is not None and self._count(req.client) >= self.config.max_queue_per_client:
                raise QueueFull(self.config.max_queue_per_client, per_client=True)
            self.need[req] = need_bytes
            self.waiting.setdefault(req.client, deque()).append(req)
            self._cv.notify()

    @contextlib.contextmanager
    def held(self):
        """Inside: nothing is admitted, so what this thread submits inside is admitted together, at the next step."""
        with self._cv:
            yield

    def schedule(self, busy: bool) -> tuple[list[Request], list[Request]] | None:
        """(requests admitted now, waiting requests dropped because they were cancelled); waits while there is
        nothing to do unless `busy`; None once closed with nothing left to finish."""
        with self._cv:
            while not (busy or self.waiting or self.closed):
                self._cv.wait()
            dropped = self._drop_cancelled()
            if self.closed and not busy and not self.running and not self.waiting:
                return None
            return self._admit(), dropped

    def release(self, req: Request) -> None:
        """A running request finished: free its place and its memory."""
        with self._cv:
            self.running.remove(req)
            self.reserved -= self.need.pop(req)

    def close(self) -> None:
        """Refuse new requests and cancel every queued and running one."""
        with self._cv:
            self.closed = True
            for req in list(self.need):
                req.cancel()
            self._cv.notify()

    @property
    def load_info(self) -> dict:
        with self._cv:
            return {"waiting": len(self.need) - len(self.running), "active": len(self.running)}

    @property
    def kv_info(self) -> dict:
        with self._cv:
            return {"budget_bytes": self.budget, "reserved_bytes": self.reserved,
                    "waiting_bytes": sum(self.need.values()) - self.reserved}

    def _admit(self) -> list[Request]:
        admitted = []
        while self.waiting and len(self.running) < self.config.max_active:
            client, queue = next(iter(self.waiting.items()))
            req = queue[0]
            if self.reserved + self.need[req] > self.budget:
                break  # the next in turn waits for memory; nobody overtakes it
            queue.popleft()
            self._next_turn(client, queue)
            self.running.append(req)
            self.reserved += self.need[req]
            admitted.append(req)
        return admitted

    def _drop_cancelled(self) -> list[Request]:
        dropped = [r for queue in self.waiting.values() for r in queue if r.cancelled]
        for req in dropped:
            queue = self.waiting[req.client]
            queue.remove(req)
            del self.need[req]
            if not queue:
                del self.waiting[req.client]
        return dropped

    def _next_turn(self, client, queue: deque) -> None:
        if queue:
            self.waiting.move_to_end(client)
        else:
            del self.waiting[client]

    def _count(self, client: str) -> int:
        return len(self.waiting.get(client, ())) + sum(r.client == client for r in self.running)
