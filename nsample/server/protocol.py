"""OpenAI wire protocol, requests: pydantic models in the order of OpenAI's API reference, each building SamplingParams.

Field policy (OpenAI answers an unknown key with 400 "Unrecognized request argument supplied"; nsample does too,
so that a typo or an unimplemented feature never silently changes nothing):
* documented fields that nsample implements map onto SamplingParams, which checks every range once;
* bookkeeping fields (user, metadata, store, service_tier, ...) are accepted and ignored;
* documented fields that nsample does not implement (tools, response_format other than text, suffix, audio, ...)
  are accepted only at a neutral value (null, [], "none", {"type": "text"}); any other value is a 400 that names
  the parameter, code "unsupported_parameter";
* extensions that nsample implements, named as in vLLM: top_k, min_p, repetition_penalty, ignore_eos,
  prompt_logprobs, and structured outputs as guided_json / guided_regex / guided_choice / guided_grammar or
  structured_outputs {json, regex, choice, grammar}, besides OpenAI's response_format (on both endpoints);
* any other key is a 400, code "unknown_parameter". `model` may be omitted (it defaults to the served model, as in
  vLLM); any other name is a 404.
Types are strict, as at OpenAI: n given as 1.5, "2" or true is a 400 invalid_type, not coerced. A string with a lone
surrogate, or a value nested deeper than 100 levels, is a 400 naming the parameter (protocol_values.py).
temperature 0 with n > 1 is allowed and gives n identical choices (vLLM rejects it; OpenAI allows it).
"""
import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nsample.errors import InvalidRequest
from nsample.models.prompts import Chat
from nsample.sampling_params import CONSTRAINTS, SamplingParams
from nsample.server.protocol_values import check_values

MAX_BEST_OF = 20  # OpenAI's limit for best_of
MAX_COMPLETION_LOGPROBS = 5  # OpenAI's limit for the legacy integer `logprobs`
# same name and meaning here and in SamplingParams
SHARED = ("n", "seed", "temperature", "top_p", "top_k", "min_p", "stop", "presence_penalty", "frequency_penalty",
          "repetition_penalty", "logit_bias", "ignore_eos", "prompt_logprobs")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ContentPart(BaseModel):
    """A content part; the engine accepts text parts and explains what it cannot take."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str
    text: str | None = None


class ChatMessage(Strict):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[ContentPart]
    name: str | None = None


class StreamOptions(Strict):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None  # accepted; nsample adds no obfuscation padding


class JSONSchemaFormat(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=True)
    name: str
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None


class StructuredOutputs(Strict):
    """vLLM's structured_outputs: at most one of them."""

    json_: dict[str, Any] | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None


class OpenAIRequest(Strict):
    """What both endpoints share; subclasses declare `stream`, `stream_options` and the sampling fields."""

    NEUTRAL: ClassVar[dict[str, tuple]] = {}  # unimplemented field -> the values that leave it unused
    # extensions both endpoints take, with vLLM's names
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    ignore_eos: bool | None = None
    prompt_logprobs: int | None = None  # the prompt tokens' logprobs, each with this many alternatives
    response_format: ResponseFormat | None = None  # OpenAI's on chat; on completions as in vLLM
    structured_outputs: StructuredOutputs | None = None
    guided_json: dict[str, Any] | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None

    @model_validator(mode="after")
    def _check_values(self):
        """Valid Unicode and bounded nesting everywhere (protocol_values.py). It raises InvalidRequest, which pydantic
        lets through, rather than a ValueError, so the error names the parameter as OpenAI does."""
        check_values(self)
        return self

    def structured(self) -> tuple[dict, str | None]:
        """The request's structured-output constraint as SamplingParams fields, and the field the client named it
        in (for errors); the fields are checked there, at most one constraint in all."""
        given: list[tuple[str, str, object]] = []  # (client's field, SamplingParams field, value)
        fmt = self.response_format
        if fmt is not None and fmt.type == "json_object":
            given.append(("response_format", "json_schema", {"type": "object"}))
        elif fmt is not None and fmt.type == "json_schema":
            if fmt.json_schema is None:
                raise InvalidRequest("'response_format' of type 'json_schema' needs a 'json_schema' object.",
                                     param="response_format", code="invalid_value")
            given.append(("response_format", "json_schema", fmt.json_schema.schema_ or {"type": "object"}))
        vllm = self.structured_outputs or StructuredOutputs()
        for field, name, value in [("json", "json_schema", vllm.json_), ("regex", "regex", vllm.regex),
                                   ("choice", "choice", vllm.choice), ("grammar", "grammar", vllm.grammar)]:
            if value is not None:
                given.append((f"structured_outputs.{field}", name, value))
        for name in ("json", "regex", "choice", "grammar"):
            if (value := getattr(self, f"guided_{name}")) is not None:
                given.append((f"guided_{name}", "json_schema" if name == "json" else name, value))
        if len(given) > 1:
            raise InvalidRequest(f"Give at most one structured-output constraint, got {given[0][0]} and "
                                 f"{given[1][0]}.", param=given[1][0], code="invalid_value")
        return ({given[0][1]: given[0][2]}, given[0][0]) if given else ({}, None)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and self.stream_options and self.stream_options.include_usage)

    def check_supported(self) -> None:
        for name, neutral in self.NEUTRAL.items():
            if getattr(self, name) not in neutral:
                raise InvalidRequest(f"nsample does not support '{name}' (accepted values: "
                                     f"{', '.join(map(json.dumps, neutral))}).", param=name,
                                     code="unsupported_parameter")
        if self.stream_options is not None and not self.stream:
            raise InvalidRequest("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                                 param="stream_options", code="invalid_value")

    def sampling(self, **kw) -> SamplingParams:
        self.check_supported()
        constraint, field = self.structured()
        given = {k: getattr(self, k) for k in SHARED} | constraint | kw
        try:
            return SamplingParams(**{k: v for k, v in given.items() if v is not None})
        except InvalidRequest as e:
            raise renamed(e, field) from None

    def name_error(self, e):
        """An engine error about the structured-output constraint (a grammar that does not compile), naming the
        field the client sent it in."""
        try:
            field = self.structured()[1]
        except InvalidRequest:
            return e
        return renamed(e, field) if isinstance(e, InvalidRequest) else e


def renamed(e: InvalidRequest, field: str | None) -> InvalidRequest:
    """An error about the structured-output constraint, naming the field the client sent it in."""
    if field is not None and e.param in CONSTRAINTS:
        e.param = field
    return e


class ChatCompletionRequest(OpenAIRequest):
    # Ordered by the OpenAI API reference: https://platform.openai.com/docs/api-reference/chat/create
    NEUTRAL = {"audio": (None,), "function_call": (None, "none", "auto"), "functions": (None, []),
               "modalities": (None, ["text"]), "prediction": (None,), "reasoning_effort": (None,),
               "tool_choice": (None, "none", "auto"),
               "tools": (None, []), "verbosity": (None,), "web_search_options": (None,)}
    messages: list[ChatMessage] = Field(min_length=1)
    model: str | None = None
    audio: Any = None
    frequency_penalty: float | None = None
    function_call: Any = None
    functions: Any = None
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = None
    max_completion_tokens: int | None = None
    max_tokens: int | None = None
    metadata: dict[str, str] | None = None
    modalities: Any = None
    n: int | None = None
    parallel_tool_calls: bool | None = None
    prediction: Any = None
    presence_penalty: float | None = None
    prompt_cache_key: str | None = None
    reasoning_effort: Any = None
    safety_identifier: str | None = None
    seed: int | None = None
    service_tier: str | None = None
    stop: str | list[str] | None = None
    store: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    temperature: float | None = None
    tool_choice: Any = None
    tools: Any = None
    top_logprobs: int | None = None
    top_p: float | None = None
    user: str | None = None
    verbosity: Any = None
    web_search_options: Any = None
    # vLLM extension: continue the final assistant message (its turn left open) instead of starting a new turn
    continue_final_message: bool = False

    def prompt(self) -> list[dict] | Chat:
        messages = [m.model_dump(exclude_none=True) for m in self.messages]
        return Chat(messages) if self.continue_final_message else messages

    def to_sampling_params(self) -> SamplingParams:
        if self.top_logprobs is not None and not self.logprobs:
            raise InvalidRequest("'top_logprobs' requires 'logprobs' to be true.", param="top_logprobs",
                                 code="invalid_value")
        limit = "max_completion_tokens" if self.max_completion_tokens is not None else "max_tokens"
        try:
            return self.sampling(max_tokens=getattr(self, limit), logprobs=self.logprobs,
                                 top_logprobs=self.top_logprobs)
        except InvalidRequest as e:  # name the field the client actually sent
            if e.param == "max_tokens":
                e.param, e.message = limit, e.message.replace("'max_tokens'", f"'{limit}'")
            raise


class CompletionRequest(OpenAIRequest):
    # Ordered by the OpenAI API reference: https://platform.openai.com/docs/api-reference/completions/create
    NEUTRAL = {"suffix": (None, "")}
    model: str | None = None
    prompt: str | list[str] | list[int] | list[list[int]]
    best_of: int | None = None
    echo: bool | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    logprobs: int | None = None
    max_tokens: int | None = 16  # OpenAI's default for this endpoint; null = up to the context window
    n: int | None = None
    presence_penalty: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    suffix: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    user: str | None = None

    def prompts(self) -> list[str | list[int]]:
        """One entry per prompt: a string or a list of token ids."""
        p = self.prompt
        if isinstance(p, str) or (p and isinstance(p[0], int)):
            return [p]
        if not p or any(x == [] for x in p):
            raise InvalidRequest("'prompt' must not be (or contain) an empty array.", param="prompt",
                                 code="empty_array")
        return list(p)

    def to_sampling_params(self) -> SamplingParams:
        """The params of one engine request: best_of choices (with logprobs, to rank them) when best_of > 1."""
        n, k = self.sampling().n, self.logprobs  # everything as sent is valid, n included
        best_of = n if self.best_of is None else self.best_of
        if k is not None and not 0 <= k <= MAX_COMPLETION_LOGPROBS:
            raise InvalidRequest(f"Invalid 'logprobs': expected a value between 0 and {MAX_COMPLETION_LOGPROBS}, "
                                 f"but got {k} instead.", param="logprobs", code="invalid_value")
        if self.max_tokens == 0 and not (self.echo or self.prompt_logprobs is not None):
            raise InvalidRequest("'max_tokens' may be 0 only with 'echo' (to score the prompt).", param="max_tokens",
                                 code="integer_below_min_value")
        if not n <= best_of <= MAX_BEST_OF:
            raise InvalidRequest(f"Invalid 'best_of': expected a value between n ({n}) and {MAX_BEST_OF}, but got "
                                 f"{best_of} instead.", param="best_of", code="invalid_value")
        if self.stream and best_of > 1 and self.best_of is not None:
            raise InvalidRequest("'best_of' results cannot be streamed; use n instead.", param="best_of",
                                 code="invalid_value")
        return self.sampling(n=best_of, max_tokens=self.max_tokens, logprobs=best_of > n or k is not None,
                             top_logprobs=k, prompt_logprobs=self.prompt_scored())

    def prompt_scored(self) -> int | None:
        """Alternatives per prompt token the engine computes: echo with logprobs k needs k (echo with max_tokens 0
        scores the prompt too), prompt_logprobs its own; the larger of the two. None: no prompt logprobs."""
        wanted = [self.prompt_logprobs]
        if self.echo and (self.logprobs is not None or self.max_tokens == 0):
            wanted.append(self.logprobs or 0)
        wanted = [w for w in wanted if w is not None]
        return max(wanted) if wanted else None
