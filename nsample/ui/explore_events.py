"""The explore events: sort and mark the cards, shade tokens, compare two choices, pick a branch point with a click,
rate cards (👍 / 👎, best, a note; blind mode), and go back and forth in the run tree. Light and engine-free: they
run outside the queue."""
from functools import partial

import gradio as gr

from nsample.errors import NSampleError
from nsample.ui import ratings, render
from nsample.ui.alternatives import alternatives_html
from nsample.ui.cards import run_cards
from nsample.ui.compare import compare_html
from nsample.ui.run import Run
from nsample.ui.tree import RunTree

SHADE_JS = "(on) => { document.body.classList.toggle('ns-shade', on); }"  # presentation only: no server trip


def wire(page, run_outputs: list, view_inputs: list, view_outputs: list) -> None:
    ex, local = page.explore, {"queue": False, "api_visibility": "private"}
    gr.on([ex.sort.input, ex.k.release], partial(render.view, page), view_inputs, view_outputs, **local)
    ex.shade.change(None, ex.shade, None, js=SHADE_JS, **local)
    gr.on([ex.compare_a.input, ex.compare_b.input], compare_html, [page.run, ex.compare_a, ex.compare_b],
          ex.compare, **local)
    for i, card in enumerate(page.grid.cards):
        card.select(_card_click(page, i), [page.run, page.tree, ex.sort, ex.k], run_outputs, **local)
    for i, box in enumerate(page.grid.notes):
        box.input(_note_taker(page, i), [page.run, page.tree, box], [page.download_json, page.download_pairs],
                  trigger_mode="always_last", **local)
    ex.blind.input(partial(_blind_toggled, page), [page.run, page.tree, ex.blind, ex.sort, ex.k], run_outputs,
                   **local)
    for picker in (ex.breadcrumb, ex.runs):
        picker.input(partial(_go_to, page), [page.tree, picker, ex.sort, ex.k], run_outputs,
                     trigger_mode="always_last", api_visibility="private")  # queued: the last pick is shown


def _card_click(page, index: int):
    async def card_click(run: Run | None, tree: RunTree | None, by: str, k, evt: gr.EventData) -> dict:
        """A click in finished card `index` (Gradio finds EventData by the annotation): on a span, Continue #index
        will cut the text where that span ends; on 👍 / 👎 / best, the card is rated (a best pick reveals a blind
        run)."""
        if run is None or index >= len(run.cards) or not run.cards[index].finish_reason:
            return {page.status: gr.skip()}
        data = getattr(evt, "_data", None) or {}
        if "rate" in data:
            if not run.ended or data["rate"] not in ratings.ACTIONS:
                return {page.status: gr.skip()}
            if ratings.rate(run, index, data["rate"]):
                return {**await render.shown(page, run, tree), **render.view(page, run, by, k)}
            return await render.rated(page, run, tree)
        cut = int(data.get("cut", -1))
        if not 0 <= cut <= len(run.cards[index].text):
            return {page.status: gr.skip()}
        run.cut = (index, cut)
        out = dict(zip(page.grid.cards, run_cards(run)))
        tok, logprobs = int(data.get("tok", -1)), run.cards[index].logprobs
        if 0 <= tok < len(logprobs) and logprobs[tok].top and not ratings.hidden(run):
            run.alternatives = (index, tok, max(0, min(int(data.get("start", 0)), cut)))
            out[page.explore.alternatives] = gr.HTML(alternatives_html(run), visible=True)
        return out

    return card_click


def _note_taker(page, index: int):
    async def take_note(run: Run | None, tree: RunTree | None, text: str) -> dict:
        """The note typed under card `index`: kept with the ratings, in the JSON record and the pairs."""
        if run is None or not run.ended:
            return {page.download_json: gr.skip()}
        try:
            ratings.note(run, index, text)
        except NSampleError as e:
            raise gr.Error(e.message) from None
        out = await render.rated(page, run, tree)
        return {c: v for c, v in out.items() if c in (page.download_json, page.download_pairs)}

    return take_note


async def _blind_toggled(page, run: Run | None, tree: RunTree | None, blind: bool, by: str, k) -> dict:
    """Ticking Blind applies to the next run; unticking it reveals the shown run."""
    if blind or not ratings.hidden(run):
        return {page.status: gr.skip()}
    run.blind.revealed = True
    if not run.ended:  # the stream shows the cards revealed from its next update on
        return {page.status: gr.skip()}
    return {**await render.shown(page, run, tree), **render.view(page, run, by, k)}


async def _go_to(page, tree: RunTree | None, run_id, by: str, k) -> dict:
    """Show another run of the tree (a parent from the breadcrumb, any run from the outline), sorted as the page."""
    run = tree.get(run_id) if tree is not None else None
    if run is None or not run.ended:
        return {}
    return {**await render.shown(page, run, tree), **render.view(page, run, by, k)}
