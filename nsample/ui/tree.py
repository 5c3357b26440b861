"""The page's runs as a tree: every Generate is a root, every "continue from here" a child of the run it cut."""
from dataclasses import dataclass, field

from nsample.ui.run import Run

MAX_RUNS = 64  # per page session; the oldest root's tree goes first


@dataclass
class RunTree:
    runs: dict[int, Run] = field(default_factory=dict)
    next_id: int = 1

    def add(self, run: Run) -> Run:
        """Give `run` its id (1, 2, ...) and keep it; its origin, if any, names its parent."""
        run.id, self.next_id = self.next_id, self.next_id + 1
        self.runs[run.id] = run
        self._prune(keep=run)
        return run

    def get(self, run_id) -> Run | None:
        try:
            return self.runs.get(int(run_id))
        except (TypeError, ValueError):
            return None

    def parent(self, run: Run) -> Run | None:
        return self.runs.get(run.origin.parent) if run.origin else None

    def children(self, run: Run) -> list[Run]:
        return [r for r in self.runs.values() if r.origin and r.origin.parent == run.id]

    def path(self, run: Run) -> list[Run]:
        """From the root down to `run`: the breadcrumb."""
        out = [run]
        while (up := self.parent(out[-1])) is not None:
            out.append(up)
        return out[::-1]

    def label(self, run: Run) -> str:
        if run.origin is None:
            return f"Run {run.id}"
        o = run.origin
        token = f", then {o.token!r}" if o.token else ""
        return f"Run {run.id} ← #{o.choice} of run {o.parent} at {o.cut} chars{token}"

    def breadcrumb(self, run: Run) -> list[tuple[str, int]]:
        return [(self.label(r), r.id) for r in self.path(run)]

    def outline(self) -> list[tuple[str, int]]:
        """Every run, depth-first, indented under its parent."""
        out = []

        def visit(run: Run, depth: int) -> None:
            out.append(("\u2003" * depth + self.label(run), run.id))
            for child in self.children(run):
                visit(child, depth + 1)

        for root in [r for r in self.runs.values() if self.parent(r) is None]:
            visit(root, 0)
        return out

    def _prune(self, keep: Run) -> None:
        """Drop the oldest subtrees hanging off the new run's path until MAX_RUNS remain."""
        kept = {r.id for r in self.path(keep)}
        while len(self.runs) > MAX_RUNS:
            off_path = [r for r in self.runs.values() if r.id not in kept and (self.parent(r) is None
                                                                              or r.origin.parent in kept)]
            if not off_path:
                return
            self._drop(off_path[0])

    def _drop(self, run: Run) -> None:
        for child in self.children(run):
            self._drop(child)
        del self.runs[run.id]
