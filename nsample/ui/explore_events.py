"""The explore events: sort and mark the cards, shade tokens, compare two choices, pick a branch point with a click,
and go back and forth in the run tree. Light and engine-free: they run outside the queue."""
from functools import partial

import gradio as gr

from nsample.ui import render
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
        card.select(_cut_picker(page, i), page.run, page.grid.cards, **local)
    for picker in (ex.breadcrumb, ex.runs):
        picker.input(partial(_go_to, page), [page.tree, picker, ex.sort, ex.k], run_outputs,
                     api_visibility="private")


def _cut_picker(page, index: int):
    def pick_cut(run: Run | None, evt: gr.EventData) -> dict:  # Gradio finds EventData by the annotation
        """A click on a span of finished card `index`: Continue #index will cut the text where that span ends."""
        if run is None or index >= len(run.cards) or not run.cards[index].finish_reason:
            return {}
        cut = int((getattr(evt, "_data", None) or {}).get("cut", -1))
        if not 0 <= cut <= len(run.cards[index].text):
            return {}
        run.cut = (index, cut)
        return dict(zip(page.grid.cards, run_cards(run)))

    return pick_cut


async def _go_to(page, tree: RunTree | None, run_id, by: str, k) -> dict:
    """Show another run of the tree (a parent from the breadcrumb, any run from the outline), sorted as the page."""
    run = tree.get(run_id) if tree is not None else None
    if run is None or not run.ended:
        return {}
    return {**await render.shown(page, run, tree), **render.view(page, run, by, k)}
