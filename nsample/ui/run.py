"""What the user asked for (RunSpec) and what came back so far (Run): the state the UI streams and exports."""
import json
import math
import random
import secrets
import time
from dataclasses import asdict, dataclass, field, replace

import pandas as pd

from nsample.errors import InvalidRequest, check_text
from nsample.models.prompts import Chat
from nsample.outputs import GenerationResult, StreamEvent, TokenLogprob
from nsample.sampling_params import MAX_STOP, SamplingParams

DEFAULTS = SamplingParams()
UI_MAX_N = 16  # cards on the page; the engine's own max_n still applies
UI_DEFAULT_N = 4  # the page is about n > 1, so it starts above the API default of 1
UI_DEFAULT_MAX_TOKENS = 128  # the API default (None = fill the context) is too long to watch
TOP_ALTERNATIVES = 5  # with logprobs on, each token's most likely alternatives, shown on a click
MODES = ("chat", "completion")
ESCAPES = {"\\n": "\n", "\\t": "\t"}  # stop strings typed as \n or \t in the UI
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
BOXES = {"system": "the system prompt", "user": "the user message", "prompt": "the prompt",
         "continuation": "the text continued", "json_schema": "the JSON schema"}  # RunSpec's text, in words


def parse_seed(text) -> int | None:
    """The seed box: empty = random per choice, else an integer."""
    if text is None or str(text).strip() == "":
        return None
    try:
        return int(str(text).strip())
    except ValueError:
        raise InvalidRequest(f"The seed must be an integer or empty, got {text!r}.", param="seed") from None


def parse_schema(text) -> str:
    """The JSON schema box: empty, or a JSON object (kept as typed, checked here and compiled by the engine)."""
    text = (text or "").strip()
    if not text:
        return ""
    try:
        schema = json.loads(text)
    except ValueError as e:
        raise InvalidRequest(f"The JSON schema is not valid JSON: {e}.", param="json_schema") from None
    if not isinstance(schema, dict):
        raise InvalidRequest("The JSON schema must be a JSON object, e.g. {\"type\": \"object\"}.",
                             param="json_schema")
    return text


def parse_stop(values) -> tuple[str, ...]:
    """The stop box: a list of strings, where a typed `\\n` or `\\t` means the control character."""
    out = []
    for v in values or []:
        for typed, real in ESCAPES.items():
            v = v.replace(typed, real)
        if v:
            out.append(v)
    if len(out) > MAX_STOP:
        raise InvalidRequest(f"At most {MAX_STOP} stop strings, got {len(out)}.", param="stop")
    return tuple(out)


@dataclass(frozen=True)
class RunSpec:
    """One Generate press: the prompt and the sampling settings, as plain values."""

    mode: str = "chat"
    system: str = ""
    user: str = ""
    prompt: str = ""
    n: int = UI_DEFAULT_N
    seed: int | None = None
    temperature: float = DEFAULTS.temperature
    top_p: float = DEFAULTS.top_p
    max_tokens: int = UI_DEFAULT_MAX_TOKENS
    stop: tuple[str, ...] = ()
    logprobs: bool = False  # off: costs nothing; on: mean logprob, ranking and token shading
    continuation: str = ""  # the answer so far, continued by a branch (chat: an assistant turn left open)
    json_schema: str = ""  # a JSON schema every choice must follow (structured output), as typed; "" = none

    def __post_init__(self):
        """Refuse text with a lone surrogate, whichever way the spec came (the boxes, a link, a branch)."""
        for name, what in BOXES.items():
            check_text(getattr(self, name), name, what)
        for s in self.stop:
            check_text(s, "stop", "a stop string")

    @classmethod
    def from_ui(cls, mode, system, user, prompt, n, seed, temperature, top_p, max_tokens, stop,
                logprobs=False, json_schema="") -> "RunSpec":
        """Parse the raw widget values (strings, floats) into a spec; bad values raise InvalidRequest."""
        mode = str(mode).lower()
        if mode not in MODES:
            raise InvalidRequest(f"Unknown mode {mode!r}.", param="mode")
        return cls(mode, system or "", user or "", prompt or "", int(n), parse_seed(seed), float(temperature),
                   float(top_p), int(max_tokens), parse_stop(stop), bool(logprobs),
                   json_schema=parse_schema(json_schema))

    @property
    def engine_prompt(self):
        """What engine.submit takes: chat messages (template applied by the engine) or raw text."""
        if self.mode == "completion":
            return self.prompt + self.continuation
        system = [{"role": "system", "content": self.system}] if self.system.strip() else []
        messages = system + [{"role": "user", "content": self.user}]
        if not self.continuation:
            return messages
        return Chat(messages + [{"role": "assistant", "content": self.continuation}])  # the answer continued

    @property
    def sampling(self) -> dict:
        top = {"top_logprobs": TOP_ALTERNATIVES} if self.logprobs else {}
        if self.json_schema and self.continuation:
            raise InvalidRequest("A branch cannot continue under a JSON schema: the schema holds a whole answer "
                                 "from its start. Clear the JSON schema box to branch.", param="json_schema")
        schema = {"json_schema": json.loads(self.json_schema)} if self.json_schema else {}
        return {"n": self.n, "seed": self.seed, "temperature": self.temperature, "top_p": self.top_p,
                "max_tokens": self.max_tokens, "stop": list(self.stop), "logprobs": self.logprobs, **top, **schema}

    def alone(self, seed: int) -> "RunSpec":
        """The same request for one choice: n=1 with that choice's seed."""
        return replace(self, n=1, seed=seed)

    def continued(self, parent: "RunSpec", text: str) -> "RunSpec":
        """These sampling settings on the parent's prompt, with `text` appended to the parent's answer so far."""
        return replace(self, mode=parent.mode, system=parent.system, user=parent.user, prompt=parent.prompt,
                       continuation=parent.continuation + text)

    def to_dict(self) -> dict:
        return {**asdict(self), "stop": list(self.stop)}


@dataclass
class Card:
    """One choice as the page shows it, filled event by event."""

    index: int
    seed: int
    text: str = ""
    tokens: int = 0
    finish_reason: str | None = None
    time_s: float | None = None  # seconds from Generate to this choice's last token
    logprobs: list[TokenLogprob] = field(default_factory=list)
    counted: bool = False  # tokens counted from streamed chunks (a remote upstream reports no token ids)

    @property
    def mean_logprob(self) -> float | None:
        values = [t.logprob for t in self.logprobs if not math.isnan(t.logprob)]
        return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Origin:
    """Where a branch starts: choice `choice` of run `parent`, its text cut after `cut` characters."""

    parent: int
    choice: int
    cut: int
    text: str  # the kept text, appended to the parent's prompt
    token: str = ""  # an alternative token put after the cut in place of the sampled one, if any


@dataclass
class Ratings:
    thumbs: dict[int, str] = field(default_factory=dict)  # choice index -> "up" | "down"
    best: int | None = None
    notes: dict[int, str] = field(default_factory=dict)

    def of(self, index: int) -> dict:
        return {"thumb": self.thumbs.get(index), "best": self.best == index, "note": self.notes.get(index, "")}

    @property
    def empty(self) -> bool:
        return not (self.thumbs or self.best is not None or any(self.notes.values()))


@dataclass
class Blind:
    """The shuffled order of a blind run's cards and whether they have been revealed."""

    seed: int
    order: list[int]
    revealed: bool = False

    @classmethod
    def draw(cls, n: int, seed: int | None = None) -> "Blind":
        seed = secrets.randbits(32) if seed is None else seed
        return cls(seed, random.Random(seed).sample(range(n), n))

    def label(self, index: int) -> str:
        """The neutral name of choice `index`: its place in the shuffled order, as a letter."""
        place = self.order.index(index)
        return f"Candidate {LETTERS[place] if place < len(LETTERS) else place + 1}"


@dataclass
class Run:
    spec: RunSpec
    model: str
    cards: list[Card]
    ids_reported: bool = True  # False for a remote engine: count tokens from logprobs or chunks instead
    started: float = field(default_factory=time.perf_counter)
    result: GenerationResult | None = None
    cancelled: bool = False
    error: str | None = None
    id: int | None = None  # its place in the page's RunTree
    origin: Origin | None = None  # set for a branch
    cut: tuple[int, int] | None = None  # (choice, characters) picked by a click in a card, for the next branch
    alternatives: tuple[int, int, int] | None = None  # (choice, token, its first character) whose top tokens show
    view: object = None  # the card order and marks (ranking.Ranking) the page shows
    report: object = None  # the report.Report, computed once the run has ended
    ratings: Ratings = field(default_factory=Ratings)  # the person's 👍 / 👎, best and notes (ratings.py)
    blind: Blind | None = None  # set for a blind run: its shuffled order, revealed once a best card is picked
    votes: object = None  # decide.Votes: each card's answer chip, the vote chart
    checked: object = None  # decide.Checked: each card's pass / fail / error chip, the pass@k curve

    @classmethod
    def start(cls, spec: RunSpec, model: str, seeds: list[int], ids_reported: bool = True) -> "Run":
        return cls(spec, model, [Card(i, s, counted=not ids_reported) for i, s in enumerate(seeds)], ids_reported)

    def apply(self, ev: StreamEvent) -> None:
        card = self.cards[ev.index]
        card.text += ev.text
        if ev.logprobs:
            card.logprobs += ev.logprobs
        card.tokens += ev.token_count
        if not self.ids_reported:  # one logprob entry per token is exact; one token per text chunk is a count
            card.counted = card.counted and not ev.logprobs
        if ev.finish_reason:
            card.finish_reason = ev.finish_reason
            card.time_s = time.perf_counter() - self.started

    def finish(self, result: GenerationResult) -> None:
        self.result = result
        if not self.ids_reported and len(self.cards) == 1 and result.usage.completion_tokens:
            self.cards[0].tokens, self.cards[0].counted = result.usage.completion_tokens, False  # the upstream's count

    def cancel(self) -> None:
        """Mark the choices that had not finished when the run was stopped."""
        self.cancelled = True
        for card in self.cards:
            card.finish_reason = card.finish_reason or "cancelled"

    def fail(self, message: str) -> None:
        """Mark the choices that had not finished when the engine failed."""
        self.error = message
        for card in self.cards:
            card.finish_reason = card.finish_reason or "error"

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def ended(self) -> bool:
        """Done, stopped or failed: nothing more will arrive."""
        return self.done or self.cancelled or self.error is not None

    @property
    def has_logprobs(self) -> bool:
        return any(c.logprobs for c in self.cards)

    def to_dataframe(self) -> pd.DataFrame:
        """One row per choice, shaped like GenerationResult.to_dataframe(), from what the page received."""
        rows = [{"index": c.index, "seed": c.seed, "text": c.text, "completion_tokens": c.tokens,
                 "finish_reason": c.finish_reason, "mean_logprob": c.mean_logprob} for c in self.cards]
        return pd.DataFrame(rows, columns=["index", "seed", "text", "completion_tokens", "finish_reason",
                                           "mean_logprob"])
