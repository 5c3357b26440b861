"""Per-request sampling parameters: one dataclass, each default written once, validated on creation."""
from dataclasses import asdict, dataclass, field, fields
from numbers import Real

from nsample.errors import InvalidRequest, check_text

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_STOP = 4
MAX_TOP_LOGPROBS = 20
CONSTRAINTS = ("json_schema", "regex", "choice", "grammar")  # structured-output fields, at most one set


@dataclass(frozen=True)
class SamplingParams:
    n: int = 1
    seed: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 (or -1) = off
    min_p: float = 0.0
    max_tokens: int | None = None  # None = as many as fit in the context window
    stop: tuple[str, ...] = ()
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    logprobs: bool = False
    top_logprobs: int = 0
    prompt_logprobs: int | None = None  # the prompt tokens' logprobs with this many alternatives each; None = off
    ignore_eos: bool = False
    # structured outputs (nsample/engine/structured.py), at most one: a JSON schema (a dict, or a pydantic model class),
    # a regular expression, a list of strings to choose from, or a Lark grammar
    json_schema: dict | None = None
    regex: str | None = None
    choice: tuple[str, ...] = ()
    grammar: str | None = None

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        if isinstance(self.stop, str):
            set_("stop", (self.stop,))
        elif self.stop is None:
            set_("stop", ())
        elif isinstance(self.stop, (list, tuple)):
            set_("stop", tuple(self.stop))
        if self.logit_bias is None:
            set_("logit_bias", {})
        if hasattr(self.json_schema, "model_json_schema"):  # a pydantic model class
            set_("json_schema", self.json_schema.model_json_schema())
        if isinstance(self.choice, list):
            set_("choice", tuple(self.choice))
        self._validate()
        if isinstance(self.logit_bias, dict):
            set_("logit_bias", {int(k): float(v) for k, v in self.logit_bias.items()})
        if self.top_k == -1:
            set_("top_k", 0)
        if self.top_logprobs and not self.logprobs:
            set_("logprobs", True)

    @classmethod
    def from_kwargs(cls, params: "SamplingParams | None" = None, **kwargs) -> "SamplingParams":
        """Start from `params` (or the defaults) and override with known keyword arguments."""
        names = {f.name for f in fields(cls)}
        unknown = set(kwargs) - names
        if unknown:
            raise TypeError(f"unknown sampling parameter(s): {', '.join(sorted(unknown))}")
        base = asdict(params) if params is not None else {}
        return cls(**{**base, **kwargs})

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def constraint(self) -> tuple[str, object] | None:
        """The structured-output field that is set and its value, or None."""
        given = [(k, getattr(self, k)) for k in CONSTRAINTS if getattr(self, k) not in (None, ())]
        return given[0] if given else None

    def _validate(self):
        _int("n", self.n, lo=1)
        if self.seed is not None:
            _int("seed", self.seed, lo=INT64_MIN, hi=INT64_MAX)
        _num("temperature", self.temperature, 0, 2)
        _num("top_p", self.top_p, 0, 1)
        _int("top_k", self.top_k, lo=-1)
        _num("min_p", self.min_p, 0, 1)
        if self.max_tokens is not None:  # 0 only to score a prompt (OpenAI's legacy echo with max_tokens 0)
            _int("max_tokens", self.max_tokens, lo=0 if self.prompt_logprobs is not None else 1)
        if len(self.stop) > MAX_STOP:
            raise InvalidRequest(f"'stop' accepts at most {MAX_STOP} sequences, got {len(self.stop)}.",
                                 param="stop", code="array_above_max_length")
        for s in self.stop:
            if not isinstance(s, str) or not s:
                raise InvalidRequest("Each 'stop' sequence must be a non-empty string.", param="stop",
                                     code="invalid_value")
            check_text(s, "stop", "a stop sequence")
        _num("presence_penalty", self.presence_penalty, -2, 2)
        _num("frequency_penalty", self.frequency_penalty, -2, 2)
        _num("repetition_penalty", self.repetition_penalty, 0, 2)
        if self.repetition_penalty == 0:
            raise InvalidRequest("'repetition_penalty' must be greater than 0.", param="repetition_penalty",
                                 code="decimal_below_min_value")
        if not isinstance(self.logit_bias, dict):
            raise InvalidRequest("'logit_bias' must map token ids to numbers.", param="logit_bias",
                                 code="invalid_type")
        for k, v in self.logit_bias.items():
            try:
                tok = int(k)
            except (TypeError, ValueError):
                raise InvalidRequest(f"Invalid token id {k!r} in 'logit_bias'.", param="logit_bias",
                                     code="invalid_value") from None
            if tok < 0 or str(k).strip() != str(tok):
                raise InvalidRequest(f"Invalid token id {k!r} in 'logit_bias'.", param="logit_bias",
                                     code="invalid_value")
            _num("logit_bias", v, -100, 100)
        if not isinstance(self.logprobs, bool):
            raise InvalidRequest("'logprobs' must be a boolean.", param="logprobs", code="invalid_type")
        _int("top_logprobs", self.top_logprobs, lo=0, hi=MAX_TOP_LOGPROBS)
        if self.prompt_logprobs is not None:
            _int("prompt_logprobs", self.prompt_logprobs, lo=0, hi=MAX_TOP_LOGPROBS)
        if not isinstance(self.ignore_eos, bool):
            raise InvalidRequest("'ignore_eos' must be a boolean.", param="ignore_eos", code="invalid_type")
        self._validate_structured()

    def _validate_structured(self):
        given = [k for k in CONSTRAINTS if getattr(self, k) not in (None, ())]
        if len(given) > 1:
            raise InvalidRequest(f"Give at most one structured-output constraint, got {' and '.join(given)}.",
                                 param=given[1], code="invalid_value")
        if self.json_schema is not None and not isinstance(self.json_schema, dict):
            raise InvalidRequest("'json_schema' must be a JSON schema object.", param="json_schema",
                                 code="invalid_type")
        for name in ("regex", "grammar"):
            if (value := getattr(self, name)) is None:
                continue
            if not (isinstance(value, str) and value):
                raise InvalidRequest(f"'{name}' must be a non-empty string.", param=name, code="invalid_type")
            check_text(value, name)
        if not isinstance(self.choice, tuple) or not all(isinstance(c, str) and c for c in self.choice):
            raise InvalidRequest("'choice' must be a list of non-empty strings.", param="choice", code="invalid_type")
        for c in self.choice:
            check_text(c, "choice", "a choice")


def _int(name: str, v, lo: int | None = None, hi: int | None = None):
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidRequest(f"Invalid type for '{name}': expected an integer, but got {_kind(v)} instead.",
                             param=name, code="invalid_type")
    if lo is not None and v < lo:
        raise InvalidRequest(f"Invalid '{name}': integer below minimum value. Expected a value >= {lo}, "
                             f"but got {v} instead.", param=name, code="integer_below_min_value")
    if hi is not None and v > hi:
        raise InvalidRequest(f"Invalid '{name}': integer above maximum value. Expected a value <= {hi}, "
                             f"but got {v} instead.", param=name, code="integer_above_max_value")


def _num(name: str, v, lo: float, hi: float):
    if isinstance(v, bool) or not isinstance(v, Real) or v != v:
        raise InvalidRequest(f"Invalid type for '{name}': expected a number, but got {_kind(v)} instead.",
                             param=name, code="invalid_type")
    if v < lo:
        raise InvalidRequest(f"Invalid '{name}': decimal below minimum value. Expected a value >= {lo}, "
                             f"but got {v} instead.", param=name, code="decimal_below_min_value")
    if v > hi:
        raise InvalidRequest(f"Invalid '{name}': decimal above maximum value. Expected a value <= {hi}, "
                             f"but got {v} instead.", param=name, code="decimal_above_max_value")


def _kind(v) -> str:
    names = {bool: "a boolean", str: "a string", float: "a decimal", list: "an array", dict: "an object",
             type(None): "null"}
    return names.get(type(v), type(v).__name__)
