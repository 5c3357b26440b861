"""What the user asked for (RunSpec) and what came back so far (Run): the state the UI streams and exports."""
import time
from dataclasses import asdict, dataclass, field, replace

from nsample.errors import InvalidRequest
from nsample.outputs import GenerationResult, StreamEvent
from nsample.sampling_params import MAX_STOP, SamplingParams

DEFAULTS = SamplingParams()
UI_MAX_N = 16  # cards on the page; the engine's own max_n still applies
UI_DEFAULT_N = 4  # the page is about n > 1, so it starts above the API default of 1
UI_DEFAULT_MAX_TOKENS = 128  # the API default (None = fill the context) is too long to watch
MODES = ("chat", "completion")
ESCAPES = {"\\n": "\n", "\\t": "\t"}  # stop strings typed as \n or \t in the UI


def parse_seed(text) -> int | None:
    """The seed box: empty = random per choice, else an integer."""
    if text is None or str(text).strip() == "":
        return None
    try:
        return int(str(text).strip())
    except ValueError:
        raise InvalidRequest(f"The seed must be an integer or empty, got {text!r}.", param="seed") from None


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

    @classmethod
    def from_ui(cls, mode, system, user, prompt, n, seed, temperature, top_p, max_tokens, stop) -> "RunSpec":
        """Parse the raw widget values (strings, floats) into a spec; bad values raise InvalidRequest."""
        mode = str(mode).lower()
        if mode not in MODES:
            raise InvalidRequest(f"Unknown mode {mode!r}.", param="mode")
        return cls(mode, system or "", user or "", prompt or "", int(n), parse_seed(seed), float(temperature),
                   float(top_p), int(max_tokens), parse_stop(stop))

    @property
    def engine_prompt(self):
        """What engine.submit takes: chat messages (template applied by the engine) or raw text."""
        if self.mode == "completion":
            return self.prompt
        system = [{"role": "system", "content": self.system}] if self.system.strip() else []
        return system + [{"role": "user", "content": self.user}]

    @property
    def sampling(self) -> dict:
        return {"n": self.n, "seed": self.seed, "temperature": self.temperature, "top_p": self.top_p,
                "max_tokens": self.max_tokens, "stop": list(self.stop)}

    def alone(self, seed: int) -> "RunSpec":
        """The same request for one choice: n=1 with that choice's seed."""
        return replace(self, n=1, seed=seed)

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


@dataclass
class Run:
    spec: RunSpec
    model: str
    cards: list[Card]
    started: float = field(default_factory=time.perf_counter)
    result: GenerationResult | None = None
    cancelled: bool = False

    @classmethod
    def start(cls, spec: RunSpec, model: str, seeds: list[int]) -> "Run":
        return cls(spec, model, [Card(i, s) for i, s in enumerate(seeds)])

    def apply(self, ev: StreamEvent) -> None:
        card = self.cards[ev.index]
        card.text += ev.text
        card.tokens += len(ev.token_ids)
        if ev.finish_reason:
            card.finish_reason = ev.finish_reason
            card.time_s = time.perf_counter() - self.started

    def cancel(self) -> None:
        """Mark the choices that had not finished when the run was stopped."""
        self.cancelled = True
        for card in self.cards:
            card.finish_reason = card.finish_reason or "cancelled"

    @property
    def done(self) -> bool:
        return self.result is not None
