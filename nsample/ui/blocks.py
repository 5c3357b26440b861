"""The gr.Blocks: the page from layout.py wired to the handlers: generate, continue from a choice or from a token's
alternative, stop, reproduce, replay a link. Gradio-specific glue only; the explore, answers, link and sweep events
are wired in explore_events.py, answer_events.py, link_events.py and sweep_events.py."""
import contextlib
import inspect
from functools import partial

import gradio as gr

from nsample.cli import PageConfig
from nsample.errors import NSampleError
from nsample.ui import answer_events, explore_events, handlers, link_events, render, sweep_events
from nsample.ui.api_help import api_base, api_markdown, api_snippet
from nsample.ui.cards import reproduction_html, run_cards
from nsample.ui.layout import Page, build_page
from nsample.ui.links import Link, LinkStore
from nsample.ui.run import UI_MAX_N, Blind, Origin, Run, RunSpec
from nsample.ui.tree import RunTree

PAGE_URL_JS = "() => [window.location.href, window.location.search]"


def build_blocks(engine, key_required: bool = False, links: LinkStore | None = None,
                 page_config: PageConfig | None = None) -> gr.Blocks:
    """The nsample page for `engine`; mount it with gr.mount_gradio_app (see nsample.ui.mount). `links` keeps
    the short links of requests too long for a URL (one bounded store per page by default); `page_config` holds
    the page's options (Python code checks are off unless it allows them)."""
    max_n = min(UI_MAX_N, engine.config.max_n)
    config = page_config or PageConfig()
    with gr.Blocks(title="nsample", delete_cache=(3600, 3600)) as demo:
        page = build_page(engine.name, max_n, answer_events.code_note(config))
        _wire(demo, page, engine, key_required, links or LinkStore(), config)
    # no per-event queue of one: every engine event shares one limit (the engine's max_active, set in _wire),
    # the engine round-robins them with API requests, and the light events run outside the queue
    demo.queue(default_concurrency_limit=None)
    return demo


def run_outputs(page: Page) -> list:
    """Every component a run's updates may touch."""
    ex = page.explore
    return [*page.grid.cards, *page.grid.columns, *page.grid.notes, *page.grid.button_rows, page.grid.order,
            page.links.copy, page.links.url, page.answers.vote_plot, page.answers.majority, page.answers.pass_plot,
            page.answers.check_summary,
            page.status, page.reproduction, page.headline, page.table, page.tokens_plot, page.similarity_plot,
            page.download_json, page.download_csv, page.download_pairs, ex.breadcrumb, ex.runs, ex.branch_note,
            ex.view_note, ex.shade, ex.compare_a, ex.compare_b, ex.compare, ex.alternatives, page.run, page.tree]


def _wire(demo: gr.Blocks, page: Page, engine, key_required: bool, links: LinkStore, config: PageConfig) -> None:
    on_engine = {"concurrency_id": "engine", "concurrency_limit": max(1, engine.config.max_active)}
    local = {"queue": False, "api_visibility": "private"}
    page.mode.change(_mode_visibility, page.mode, [page.system, page.user, page.prompt], **local)
    page.n.change(lambda k: [gr.Column(visible=i < int(k)) for i in range(len(page.grid.columns))], page.n,
                  page.grid.columns, **local)
    gr.on([page.n.change, page.temperature.change], _hint, [page.temperature, page.n], page.hint, **local)

    outputs, ex = run_outputs(page), page.explore
    view_inputs, view_outputs = [page.run, ex.sort, ex.k], [*page.grid.cards, page.grid.order, ex.view_note]
    more = [ex.blind, page.answers.extract, page.answers.pattern]  # after page.inputs: blind mode, the extractor
    runs = [page.generate.click(_per_session(_generate, engine, page), [page.tree, *page.inputs, *more], outputs,
                                api_name="generate", **on_engine)]
    for i, button in enumerate(page.grid.continue_buttons):
        runs.append(button.click(_per_session(_continue, engine, page, i), [page.run, page.tree, *page.inputs, *more],
                                 outputs, api_name=f"continue_{i}", api_visibility="undocumented", **on_engine))
    runs.append(ex.alternatives.select(_alternative_picked(engine, page), [page.run, page.tree, *page.inputs, *more],
                                       outputs, api_visibility="private", **on_engine))
    decide = answer_events.wire(page, config)
    for event in runs:  # the page's sort, and the Answers panel's extractor and check, apply once a run has ended
        decide(event.then(partial(render.view, page), view_inputs, view_outputs, **local))
    page.stop_button.click(partial(_stopped, page), [page.run, page.tree, ex.sort, ex.k], outputs, cancels=runs,
                           api_name="stop", api_visibility="undocumented")
    for i, button in enumerate(page.grid.reproduce_buttons):
        button.click(_per_session(_reproduce, engine, i), page.run, page.reproduction, api_name=f"reproduce_{i}",
                     api_visibility="undocumented", **on_engine)
    explore_events.wire(page, outputs, view_inputs, view_outputs)
    sweep_events.wire(page, engine, on_engine, config)
    loaded = demo.load(None, None, [page.page_url, page.links.query], js=PAGE_URL_JS)
    loaded.then(partial(_api_help, engine.name, key_required), page.page_url, [page.api_text, page.api_code], **local)
    decide(link_events.wire(page, engine, links, loaded, _per_session(_replay, engine, page), view_inputs,
                            view_outputs, outputs, on_engine))
    loaded.then(None, js=answer_events.VOTE_FILTER_JS, **local)


def _mode_visibility(mode):
    chat = mode == "chat"
    return gr.Textbox(visible=chat), gr.Textbox(visible=chat), gr.Textbox(visible=not chat)


def _hint(temperature, n):
    text = handlers.greedy_hint(temperature, n)
    return gr.Markdown(text, visible=bool(text))


def _api_help(model: str, key_required: bool, page_url: str):
    base = api_base(page_url)
    return api_markdown(base, model), api_snippet(base, model, key_required)


async def _generate(engine, page: Page, client: str | None, tree: RunTree | None, *values):
    """A new root run from the inputs (page.inputs, then the blind box and the answer extractor)."""
    *values, blind, preset, pattern = values
    try:
        spec = RunSpec.from_ui(*values)
        stream = handlers.generate(engine, spec, client=client)
    except NSampleError as e:
        raise gr.Error(e.message) from None
    async for out in _stream(page, stream, tree or RunTree(), None, bool(blind), (preset, pattern)):
        yield out


async def _replay(engine, page: Page, client: str | None, link: Link | None, tree: RunTree | None):
    """The request of the link the page was opened with, run as a new root run (nothing without a link)."""
    if link is None:
        yield {page.status: gr.skip()}
        return
    try:
        stream = handlers.generate(engine, link.spec, client=client)
    except NSampleError as e:
        raise gr.Error(e.message) from None
    async for out in _stream(page, stream, tree or RunTree(), None):
        yield out


async def _continue(engine, page: Page, index: int, client: str | None, parent: Run | None, tree: RunTree | None,
                    *values):
    """n new choices continuing choice `index` of the shown run, up to the point picked in its card."""
    *values, blind, preset, pattern = values
    try:
        spec, origin = handlers.branch(parent, index, RunSpec.from_ui(*values))
        stream = handlers.generate(engine, spec, client=client)
    except NSampleError as e:
        raise gr.Error(e.message) from None
    async for out in _stream(page, stream, tree or RunTree(), origin, bool(blind), (preset, pattern)):
        yield out


def _alternative_picked(engine, page: Page):
    async def branch(request: gr.Request, evt: gr.EventData, parent: Run | None, tree: RunTree | None,
                     *values):
        """A click on one of a token's alternatives: n new choices from the text before it plus that token."""
        *values, blind, preset, pattern = values
        alternative = int((getattr(evt, "_data", None) or {}).get("alt", -1))
        client = f"page:{request.session_hash}" if request is not None and request.session_hash else None
        try:
            index = parent.alternatives[0] if parent is not None and parent.alternatives else -1
            spec, origin = handlers.branch_at_token(parent, index, alternative, RunSpec.from_ui(*values))
            stream = handlers.generate(engine, spec, client=client)
        except NSampleError as e:
            raise gr.Error(e.message) from None
        async for out in _stream(page, stream, tree or RunTree(), origin, bool(blind), (preset, pattern)):
            yield out

    return branch


async def _stream(page: Page, stream, tree: RunTree, origin: Origin | None, blind: bool = False,
                  extract: tuple[str, str] | None = None):
    """Stream a run into the cards (only changed ones), then show its report; a failure keeps the partial run."""
    run = None
    try:
        async with contextlib.aclosing(stream):
            shown: dict[int, str] = {}
            async for run in stream:
                out, first = {}, not shown
                if first:
                    run.origin = origin
                    run.blind = Blind.draw(len(run.cards)) if blind else None
                    out.update(render.started(page, tree.add(run), tree))
                out.update(answer_events.live(page, run, extract))  # the votes so far
                for card, html in zip(run.cards, run_cards(run)):
                    if shown.get(card.index) != html:
                        out[page.grid.cards[card.index]] = shown[card.index] = html
                if run.done:
                    out.update(await render.shown(page, run, tree))
                elif not first:
                    out[page.status] = render.status(run)
                yield out
    except NSampleError as e:
        if run is not None and run.error is not None:
            yield await render.shown(page, run, tree)
        raise gr.Error(e.message) from None


async def _stopped(page: Page, run: Run | None, tree: RunTree | None, by: str, k):
    """After Stop cancels the event (and with it the engine request): the partial run, reported like any other."""
    if run is None or run.done or run.error is not None:
        return {page.status: gr.skip()}
    run.cancel()
    return {**await render.shown(page, run, tree or RunTree()), **render.view(page, run, by, k)}


async def _reproduce(engine, index: int, client: str | None, run: Run | None):
    try:
        repro = await handlers.reproduce(engine, run, index, client=client)
    except NSampleError as e:
        raise gr.Error(e.message) from None
    return reproduction_html(repro, run.cards[index].text)


def _per_session(fn, *bound):
    """fn(*bound, client, *inputs) as a Gradio handler: Gradio passes the request, whose session names the client
    for the engine's per-client fairness (a partial would hide the gr.Request annotation from Gradio)."""
    def client(request: gr.Request | None) -> str | None:
        return f"page:{request.session_hash}" if request is not None and request.session_hash else None

    if inspect.isasyncgenfunction(fn):
        async def stream(request: gr.Request, *inputs):
            async for out in fn(*bound, client(request), *inputs):
                yield out
        return stream

    async def call(request: gr.Request, *inputs):
        return await fn(*bound, client(request), *inputs)
    return call
