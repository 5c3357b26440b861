"""The OpenAPI document at /openapi.json, made to describe what the server really takes and sends.

FastAPI derives the request and response schemas from the pydantic models; this adds what they cannot say: the
ranges SamplingParams enforces (and n's maximum from the engine), that a stream answers text/event-stream, and the
OpenAI error body for every status the routes can return (no 422: validation errors are 400 here).
"""
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from nsample.sampling_params import INT64_MAX, INT64_MIN, MAX_STOP, MAX_TOP_LOGPROBS
from nsample.server.protocol import MAX_BEST_OF, MAX_COMPLETION_LOGPROBS
from nsample.server.responses import ChatCompletionChunk, CompletionResponse, ErrorResponse

CHUNKS = {"/v1/chat/completions": ChatCompletionChunk, "/v1/completions": CompletionResponse}  # one stream event



def _range(kind: str, lo=None, hi=None, **more) -> dict:
    return {kind: {k: v for k, v in {"minimum": lo, "maximum": hi, **more}.items() if v is not None}}


# field -> {JSON type of its non-null value: the keywords it gets}, as SamplingParams and the request models check
BOUNDS = {"n": _range("integer", 1), "seed": _range("integer", INT64_MIN, INT64_MAX),
          "temperature": _range("number", 0, 2), "top_p": _range("number", 0, 1), "top_k": _range("integer", -1),
          "min_p": _range("number", 0, 1), "max_tokens": _range("integer", 1),
          "max_completion_tokens": _range("integer", 1), "presence_penalty": _range("number", -2, 2),
          "frequency_penalty": _range("number", -2, 2), "repetition_penalty": _range("number", None, 2,
                                                                                     exclusiveMinimum=0),
          "top_logprobs": _range("integer", 0, MAX_TOP_LOGPROBS), "best_of": _range("integer", 1, MAX_BEST_OF),
          "logit_bias": {"object": {"propertyNames": {"pattern": "^(0|[1-9][0-9]*)$"},
                                    "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100}}},
          "stop": {"string": {"minLength": 1},
                   "array": {"maxItems": MAX_STOP, "items": {"type": "string", "minLength": 1}}}}
COMPLETION_BOUNDS = {"logprobs": _range("integer", 0, MAX_COMPLETION_LOGPROBS)}
ERRORS = {400: "Bad request: an invalid parameter, malformed JSON, a prompt or KV cache that does not fit",
          401: "Missing or wrong API key", 404: "Unknown model or path", 413: "Request body too large",
          408: "The request body arrived too slowly", 429: "The queue is full; retry after Retry-After seconds",
          500: "Server error", 502: "The upstream server failed (remote engines)",
          504: "The upstream server timed out (remote engines)"}


def stream(chunk: str) -> dict:
    """text/event-stream, each event described (`itemSchema`, as Open API 3.2 has it): a chunk, an error, [DONE]."""
    payload = {"anyOf": [{"$ref": f"#/components/schemas/{chunk}"}, {"$ref": "#/components/schemas/ErrorResponse"}]}
    data = {"anyOf": [{"const": "[DONE]"},
                      {"type": "string", "contentMediaType": "application/json", "contentSchema": payload}]}
    event = {"type": "object", "required": ["data"], "properties": {"data": data}}
    return {"text/event-stream": {"itemSchema": event, "description": "with `stream: true`: one `data: {chunk}` "
                                  "event per choice and step, a usage chunk if asked for, then `data: [DONE]`"}}


def error_responses(*statuses: int) -> dict:
    return {s: {"model": ErrorResponse, "description": ERRORS[s]} for s in statuses}


def install(app: FastAPI, max_n: int, model: str) -> None:
    """Serve the document described above (built once, on first request)."""

    def openapi() -> dict:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schemas = doc["components"]["schemas"]
            for path, ops in doc["paths"].items():
                for op in ops.values():
                    op["responses"].pop("422", None)
                    for param in op.get("parameters", []):
                        if param["name"] == "model":
                            param["schema"]["examples"] = [model]  # the served model: a model card, not a 404
                    if path in CHUNKS:
                        op["responses"]["200"]["content"].update(stream(CHUNKS[path].__name__))
            for chunk in CHUNKS.values():
                schema = chunk.model_json_schema(ref_template="#/components/schemas/{model}", mode="serialization")
                schemas.update(schema.pop("$defs", {}) | {chunk.__name__: schema})
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
            n = {"n": _range("integer", 1, max_n)}
            _bound(schemas["ChatCompletionRequest"], BOUNDS | n)
            _bound(schemas["CompletionRequest"], BOUNDS | COMPLETION_BOUNDS | n)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi


def _bound(schema: dict, bounds: dict) -> None:
    """Add each property's keywords to its members of the matching JSON type."""
    for name, by_type in bounds.items():
        prop = schema["properties"].get(name)
        for member in prop.get("anyOf", [prop]) if prop else []:
            member.update(by_type.get(member.get("type"), {}))
