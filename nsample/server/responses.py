"""OpenAI wire protocol, responses: what the server sends back, with nsample's extra per-choice `seed`.

Every choice carries `seed` (the seed it was sampled with: rerun it alone with n=1 and that seed) and `stop_reason`
(the stop string or token id that ended it, as in vLLM).
"""
import time
from typing import Literal

from pydantic import BaseModel, Field, model_serializer

# vLLM's prompt_logprobs: per prompt token (the first null) {token id: {"logprob", "rank", "decoded_token"}}
PromptLogprobs = list[dict[str, dict[str, float | int | str | None]] | None] | None


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """Every error, whatever its status: OpenAI's shape."""

    error: ErrorBody


class UsageInfo(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=lambda: int(time.time()))
    owned_by: str = "nsample"
    max_model_len: int | None = None


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


# --- chat ---------------------------------------------------------------------------------------------
class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class ChatTokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob] = []


class ChatLogprobs(BaseModel):
    content: list[ChatTokenLogprob] | None = None
    refusal: list[ChatTokenLogprob] | None = None


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    refusal: str | None = None


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None = None
    seed: int
    stop_reason: str | int | None = None


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageInfo
    system_fingerprint: str | None = None
    prompt_logprobs: PromptLogprobs = None


class Delta(BaseModel):
    """Only the keys that changed: {"role", "content": ""} first, then {"content"}, and {} with the finish reason."""

    role: Literal["assistant"] | None = None
    content: str | None = None

    @model_serializer(mode="wrap")
    def _given(self, handler):
        return {k: v for k, v in handler(self).items() if v is not None}


class ChatChunkChoice(BaseModel):
    index: int
    delta: Delta
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None = None
    seed: int
    stop_reason: str | int | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[ChatChunkChoice]
    usage: UsageInfo | None = None
    prompt_logprobs: PromptLogprobs = None


# --- completions ----------------------------------------------------------------------------------------
class CompletionLogprobs(BaseModel):
    """Parallel lists; an echoed prompt's first token has a null logprob and null top_logprobs."""

    tokens: list[str] = []
    token_logprobs: list[float | None] = []
    top_logprobs: list[dict[str, float] | None] = []
    text_offset: list[int] = []


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None = None
    seed: int
    stop_reason: str | int | None = None
    prompt_logprobs: PromptLogprobs = None


class CompletionResponse(BaseModel):
    """The whole response, and (object "text_completion", usage null until the last chunk) one stream chunk."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[CompletionChoice]
    usage: UsageInfo | None = None
