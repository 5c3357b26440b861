"""HTTP routes: thin wrappers that hand the parsed request to OpenAIServing and choose the response type.

`create_app(engine, config)` registers every route itself and adds no catch-all, so a Gradio UI can be mounted
next to them (`gr.mount_gradio_app(app, demo, path="/")`). Auth and the body-size limit apply to /v1/* only;
/health stays open.
"""
import asyncio

from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel

import nsample
from nsample.errors import NSampleError
from nsample.server import errors, openapi
from nsample.server.config import ServerConfig
from nsample.server.guard import Guard
from nsample.server.protocol import ChatCompletionRequest, CompletionRequest
from nsample.server.responses import ChatCompletionResponse, CompletionResponse, ModelCard, ModelList
from nsample.server.serving import OpenAIServing


def create_app(engine: "nsample.Engine", config: ServerConfig | None = None) -> FastAPI:
    config = config or ServerConfig()
    serving = OpenAIServing(engine, config)
    app = FastAPI(title="nsample", version=nsample.__version__,
                  description="OpenAI-compatible API where `n` is real: n independently seeded choices per prompt.")
    app.state.engine, app.state.serving, app.state.server_config = engine, serving, config
    errors.install(app, config.retry_after_s)
    openapi.install(app, engine.config.max_n, engine.name)
    app.add_middleware(Guard, api_key=config.api_key, max_body_bytes=config.max_body_bytes,
                       body_timeout_s=config.request_timeout_s)

    def render(result) -> Response:
        if isinstance(result, NSampleError):
            return errors.error_response(result, config.retry_after_s)
        if isinstance(result, BaseModel):
            return Response(result.model_dump_json(), media_type="application/json")
        if result is None:  # the client left before the answer was ready; nobody reads this
            return Response(status_code=499)
        return EventStream(result, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "model": engine.name, **engine.health()}

    def generation(model) -> dict:
        return {200: {"model": model, "description": "The answer, or with `stream: true` its server-sent events"},
                **openapi.error_responses(400, 401, 404, 408, 413, 429, 500, 502, 504)}

    @app.get("/v1/models", responses={200: {"model": ModelList}, **openapi.error_responses(401)})
    async def list_models() -> Response:
        return render(serving.models())

    @app.get("/v1/models/{model:path}", responses={200: {"model": ModelCard}, **openapi.error_responses(401, 404)})
    async def get_model(model: str) -> Response:
        return render(serving.model(model))

    @app.post("/v1/chat/completions", responses=generation(ChatCompletionResponse))
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        return render(await until_disconnected(request, serving.chat(body, client_of(request))))

    @app.post("/v1/completions", responses=generation(CompletionResponse))
    async def create_completions(body: CompletionRequest, request: Request) -> Response:
        return render(await until_disconnected(request, serving.completions(body, client_of(request))))

    return app


def client_of(request: Request) -> str | None:
    """Who asks, for the engine's per-client fairness: the peer address (behind a proxy, uvicorn takes it from
    X-Forwarded-For when the proxy is in FORWARDED_ALLOW_IPS)."""
    return f"api:{request.client.host}" if request.client else None


async def until_disconnected(request: Request, work):
    """Await `work`; if the client disconnects first, cancel it (which cancels its engine requests) -> None."""
    task, gone = asyncio.ensure_future(work), asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        return task.result() if task.done() else None
    finally:
        task.cancel()
        gone.cancel()


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


class EventStream(StreamingResponse):
    """Server-sent events; the generator is closed however the response ends, so its engine requests are cancelled."""

    media_type = "text/event-stream"

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()
