"""The gr.Blocks: the page from layout.py wired to the handlers. Gradio-specific glue only."""
import asyncio
import contextlib
import tempfile
import uuid
from functools import partial
from pathlib import Path

import gradio as gr

from nsample.errors import NSampleError
from nsample.ui import handlers, report
from nsample.ui.api_help import api_base, api_markdown, api_snippet
from nsample.ui.cards import card_html, reproduction_html
from nsample.ui.export import prune_exports, usage_table, write_exports
from nsample.ui.layout import Page, build_page
from nsample.ui.run import UI_MAX_N, Run, RunSpec

PAGE_URL_JS = "() => window.location.href"
EXPORT_DIR = Path(tempfile.gettempdir()) / "nsample-ui"


def build_blocks(engine, key_required: bool = False) -> gr.Blocks:
    """The nsample page for `engine`; mount it with gr.mount_gradio_app (see nsample.ui.mount)."""
    max_n = min(UI_MAX_N, engine.config.max_n)
    with gr.Blocks(title="nsample", delete_cache=(3600, 3600)) as demo:
        page = build_page(engine.name, max_n)
        _wire(demo, page, engine, key_required)
    # no per-event queue of one: Generate and Reproduce share one limit (the engine's max_active, set in _wire),
    # the engine round-robins them with API requests, and the light events run outside the queue
    demo.queue(default_concurrency_limit=None)
    return demo


def _wire(demo: gr.Blocks, page: Page, engine, key_required: bool) -> None:
    limit = max(1, engine.config.max_active)
    local = {"queue": False, "api_visibility": "private"}
    page.mode.change(_mode_visibility, page.mode, [page.system, page.user, page.prompt], **local)
    page.n.change(lambda k: [gr.Column(visible=i < int(k)) for i in range(len(page.columns))], page.n,
                  page.columns, **local)
    gr.on([page.n.change, page.temperature.change], _hint, [page.temperature, page.n], page.hint, **local)

    outputs = [*page.cards, *page.columns, page.status, page.reproduction, page.headline, page.table,
               page.tokens_plot, page.similarity_plot, page.download_json, page.download_csv, page.run]
    run_event = page.generate.click(partial(_generate, engine, page), page.inputs, outputs, api_name="generate",
                                    concurrency_id="engine", concurrency_limit=limit)
    page.stop_button.click(partial(_stopped, page), page.run, [*page.cards, page.status], cancels=[run_event],
                           api_name="stop", api_visibility="undocumented")
    for i, button in enumerate(page.reproduce_buttons):
        button.click(partial(_reproduce, engine, i), page.run, page.reproduction, api_name=f"reproduce_{i}",
                     api_visibility="undocumented", concurrency_id="engine", concurrency_limit=limit)
    demo.load(None, None, page.page_url, js=PAGE_URL_JS).then(
        partial(_api_help, engine.name, key_required), page.page_url, [page.api_text, page.api_code], **local)


def _mode_visibility(mode):
    chat = mode == "chat"
    return gr.Textbox(visible=chat), gr.Textbox(visible=chat), gr.Textbox(visible=not chat)


def _hint(temperature, n):
    text = handlers.greedy_hint(temperature, n)
    return gr.Markdown(text, visible=bool(text))


def _api_help(model: str, key_required: bool, page_url: str):
    base = api_base(page_url)
    return api_markdown(base, model), api_snippet(base, model, key_required)


async def _generate(engine, page: Page, *values):
    """Stream the run into the cards (only changed ones), then fill the report and the downloads."""
    try:
        spec = RunSpec.from_ui(*values)
        stream = handlers.generate(engine, spec)
        async with contextlib.aclosing(stream):
            shown: dict[int, str] = {}
            async for run in stream:
                first = not shown
                out = {}
                for card in run.cards:
                    html = card_html(card)
                    if shown.get(card.index) != html:
                        out[page.cards[card.index]] = shown[card.index] = html
                if first:
                    out.update(_started(page, run))
                elif run.done:
                    out.update(await _finished(page, run))
                else:
                    out[page.status] = _status(run)
                yield out
    except NSampleError as e:
        raise gr.Error(e.message) from None


def _started(page: Page, run: Run) -> dict:
    n = len(run.cards)
    hidden = {c: None for c in (page.headline, page.table, page.tokens_plot, page.similarity_plot)}
    return {**{col: gr.Column(visible=i < n) for i, col in enumerate(page.columns)}, **hidden,
            page.status: _status(run), page.reproduction: "", page.run: run,
            page.download_json: gr.DownloadButton(visible=False), page.download_csv: gr.DownloadButton(visible=False)}


async def _finished(page: Page, run: Run) -> dict:
    rep = await asyncio.to_thread(report.summarize, run)
    await asyncio.to_thread(prune_exports, EXPORT_DIR)
    json_path, csv_path = await asyncio.to_thread(write_exports, run, EXPORT_DIR / uuid.uuid4().hex, rep.diversity)
    return {page.status: _status(run), page.headline: rep.headline, page.table: _display(usage_table(run, text=False)),
            page.tokens_plot: rep.tokens_figure, page.similarity_plot: rep.similarity_figure, page.run: run,
            page.download_json: gr.DownloadButton(value=str(json_path), visible=True),
            page.download_csv: gr.DownloadButton(value=str(csv_path), visible=True)}


def _display(table):
    """Seeds are 64-bit: as text, or the browser rounds them to a double."""
    return table.astype({"seed": str})


def _status(run: Run) -> str:
    tokens = sum(c.tokens for c in run.cards)
    if run.result is None:
        verb = "Stopped" if run.cancelled else "Generating"
        return f"{verb}: {len(run.cards)} choices, {tokens} tokens so far."
    t, u = run.result.timings, run.result.usage
    return (f"Done: {len(run.cards)} choices, {u.completion_tokens} completion tokens from a {u.prompt_tokens}-token "
            f"prompt; prefill {t.prefill_s:.2f} s, decode {t.decode_s:.2f} s, {t.tokens_per_s:.0f} tokens/s.")


def _stopped(page: Page, run: Run | None):
    """After Stop cancels the event (and with it the engine request): mark the unfinished cards."""
    if run is None or run.done:
        return {page.status: gr.skip()}
    run.cancel()
    return {**{page.cards[c.index]: card_html(c) for c in run.cards}, page.status: _status(run)}


async def _reproduce(engine, index: int, run: Run | None):
    try:
        repro = await handlers.reproduce(engine, run, index)
    except NSampleError as e:
        raise gr.Error(e.message) from None
    return reproduction_html(repro, run.cards[index].text)
