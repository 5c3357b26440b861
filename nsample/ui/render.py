"""A run on the page, as component updates: when it starts, when it ends (done, stopped or failed) or is shown
again from the run tree, and when the cards are re-sorted. Gradio-specific; the work is in the plain modules."""
import asyncio
import tempfile
import uuid
from html import escape
from pathlib import Path

import gradio as gr

from nsample.ui import report
from nsample.ui.alternatives import alternatives_html
from nsample.ui.cards import run_cards
from nsample.ui.compare import compare_html
from nsample.ui.export import prune_exports, usage_table, write_exports
from nsample.ui.ranking import Ranking, logprob_note, order_css, rank
from nsample.ui.ratings import hidden, write_pairs
from nsample.ui.run import Run
from nsample.ui.tree import RunTree

EXPORT_DIR = Path(tempfile.gettempdir()) / "nsample-ui"
PREFIX_SHOWN = 400  # characters of a branch's inherited text shown above its cards
BLIND_NOTE = ("**Blind run:** the cards are shuffled and their index, seed, logprobs, sort and report are hidden. "
              "Pick a ★ best card (or untick Blind) to reveal them.")


def started(page, run: Run, tree: RunTree) -> dict:
    """The first update of a run: its columns, its place in the tree, an empty report."""
    n, ex = len(run.cards), page.explore
    empty = {c: gr.update(value=None, visible=False) for c in (page.table, page.tokens_plot, page.similarity_plot)}
    return {**{col: gr.Column(visible=i < n) for i, col in enumerate(page.grid.columns)}, **empty,
            **_tree_updates(page, run, tree), **_card_extras(page, run), page.headline: "", page.status: status(run),
            page.reproduction: "", page.grid.order: _blind_order(run), ex.view_note: BLIND_NOTE if hidden(run) else "",
            ex.compare: "", page.run: run, page.tree: tree, page.links.copy: gr.Button(visible=False),
            page.links.url: gr.Textbox("", visible=False), **decided(page, None),
            ex.alternatives: gr.HTML(visible=False),
            page.download_json: gr.DownloadButton(visible=False), page.download_csv: gr.DownloadButton(visible=False)}


async def shown(page, run: Run, tree: RunTree) -> dict:
    """Everything about an ended run: cards, report, downloads (with the tree), compare, tree navigation."""
    if run.report is None:
        run.report = await asyncio.to_thread(report.summarize, run)
    rep = run.report
    await asyncio.to_thread(prune_exports, EXPORT_DIR)
    json_path, csv_path = await asyncio.to_thread(write_exports, run, EXPORT_DIR / uuid.uuid4().hex, rep.diversity,
                                                  tree)
    pairs = await asyncio.to_thread(_pairs_update, page, tree)
    cards = dict(zip(page.grid.cards, run_cards(run)))
    ex, columns = page.explore, {col: gr.Column(visible=i < len(run.cards)) for i, col in enumerate(page.grid.columns)}
    common = {**cards, **columns, **_tree_updates(page, run, tree), **_card_extras(page, run), **pairs,
              page.status: status(run), page.headline: rep.headline, page.run: run, page.tree: tree,
              page.links.copy: gr.Button(visible=not hidden(run)), page.links.url: gr.Textbox("", visible=False),
              ex.alternatives: gr.HTML(alternatives_html(run),
                                       visible=run.alternatives is not None and not hidden(run)),
              **decided(page, run)}
    if hidden(run):  # what would tell the cards apart waits for the reveal
        off = {c: gr.update(visible=False) for c in (page.table, page.tokens_plot, page.similarity_plot)}
        return {**common, **off, page.download_json: gr.DownloadButton(visible=False),
                page.download_csv: gr.DownloadButton(visible=False), page.grid.order: _blind_order(run),
                ex.view_note: BLIND_NOTE, ex.shade: gr.Checkbox(interactive=False),
                ex.compare_a: gr.Dropdown(choices=[], value=None), ex.compare_b: gr.Dropdown(choices=[], value=None),
                ex.compare: ""}
    choices = [(f"#{c.index} · seed {c.seed}", c.index) for c in run.cards]
    order = run.view.order if run.view is not None else [c.index for c in run.cards]
    a, b = order[0], order[min(1, len(order) - 1)]
    return {**common, page.table: gr.update(value=_display(usage_table(run, text=False)), visible=True),
            page.tokens_plot: gr.update(value=rep.tokens_figure, visible=True),
            page.similarity_plot: gr.update(value=rep.similarity_figure, visible=rep.similarity_figure is not None),
            page.download_json: gr.DownloadButton(value=str(json_path), visible=True),
            page.download_csv: gr.DownloadButton(value=str(csv_path), visible=True),
            page.grid.order: order_css(run.view), ex.view_note: _note(run),
            ex.shade: gr.Checkbox(interactive=run.has_logprobs),
            ex.compare_a: gr.Dropdown(choices=choices, value=a), ex.compare_b: gr.Dropdown(choices=choices, value=b),
            ex.compare: compare_html(run, a, b)}


async def rated(page, run: Run, tree: RunTree) -> dict:
    """After a rating or a note: the cards, and the JSON record and the session's pairs written again."""
    out = {**dict(zip(page.grid.cards, run_cards(run))), **await asyncio.to_thread(_pairs_update, page, tree)}
    if not hidden(run):
        diversity = getattr(run.report, "diversity", None)
        json_path, _ = await asyncio.to_thread(write_exports, run, EXPORT_DIR / uuid.uuid4().hex, diversity, tree)
        out[page.download_json] = gr.DownloadButton(value=str(json_path), visible=True)
    return out


def decided(page, run: Run | None) -> dict:
    """The Answers panel for `run`: its vote chart and majority line, its pass@k curve and check summary."""
    votes, checked = getattr(run, "votes", None), getattr(run, "checked", None)
    a = page.answers
    return {a.vote_plot: gr.update(value=votes.figure if votes else None, visible=votes is not None),
            a.majority: votes.majority if votes else "",
            a.pass_plot: gr.update(value=checked.figure if checked else None, visible=checked is not None),
            a.check_summary: checked.summary if checked else ""}


def view(page, run: Run | None, by: str, k) -> dict:
    """Re-rank the cards of an ended run (sort by, k) and re-draw them with their marks."""
    if run is None or not run.ended:
        return {}
    if hidden(run):
        return {page.grid.order: _blind_order(run), page.explore.view_note: BLIND_NOTE}
    try:
        run.view = rank(run, by, int(k))
    except ValueError as e:  # e.g. an analysis that cannot run on these texts: say so, keep the order
        run.view = None
        return {page.explore.view_note: f"Cannot sort: {e}"}
    return {**dict(zip(page.grid.cards, run_cards(run))), page.grid.order: order_css(run.view),
            page.explore.view_note: _note(run)}


def status(run: Run) -> str:
    tokens = sum(c.tokens for c in run.cards)
    if run.error is not None:
        return f"Failed: {run.error} ({len(run.cards)} choices, {tokens} tokens before the failure)."
    if run.result is None:
        verb = "Stopped" if run.cancelled else "Generating"
        return f"{verb}: {len(run.cards)} choices, {tokens} tokens so far."
    t, u = run.result.timings, run.result.usage
    return (f"Done: {len(run.cards)} choices, {u.completion_tokens} completion tokens from a {u.prompt_tokens}-token "
            f"prompt; prefill {t.prefill_s:.2f} s, decode {t.decode_s:.2f} s, {t.tokens_per_s:.0f} tokens/s.")


def _tree_updates(page, run: Run, tree: RunTree) -> dict:
    """The breadcrumb (root to this run), the outline of all runs, and what a branch continues."""
    many, ex = len(tree.runs) > 1, page.explore
    note = ""
    if run.origin is not None:
        o, inherited = run.origin, run.spec.continuation
        shown_text = ("…" if len(inherited) > PREFIX_SHOWN else "") + inherited[-PREFIX_SHOWN:]
        note = (f'<div class="ns-branch"><b>Branch:</b> continues choice #{o.choice} of run {o.parent} after {o.cut} '
                f'characters; the cards below go on from this text:<div class="ns-prefix">'
                f'{escape(shown_text) or "<i>(nothing: the answer starts afresh)</i>"}</div></div>')
    return {ex.breadcrumb: gr.Radio(choices=tree.breadcrumb(run), value=run.id, visible=many),
            ex.runs: gr.Dropdown(choices=tree.outline(), value=run.id, visible=many),
            ex.branch_note: gr.HTML(note, visible=bool(note))}


def _blind_order(run: Run) -> str:
    """A blind run's columns in its shuffled order."""
    return order_css(Ranking(run.blind.order)) if hidden(run) else ""


def _card_extras(page, run: Run) -> dict:
    """Each card's note box (this run's notes) and its Reproduce / Continue row (hidden while blind)."""
    notes = {box: run.ratings.notes.get(i, "") for i, box in enumerate(page.grid.notes)}
    rows = {row: gr.Row(visible=not hidden(run)) for row in page.grid.button_rows}
    return {**notes, **rows}


def _pairs_update(page, tree: RunTree) -> dict:
    """The session's preference pairs, written afresh; the button shows only when there are some."""
    path, count = write_pairs(tree, EXPORT_DIR / uuid.uuid4().hex)
    if path is None:
        return {page.download_pairs: gr.DownloadButton(visible=False)}
    label = f"Download preference pairs (DPO JSONL, {count} rows)"
    return {page.download_pairs: gr.DownloadButton(label, value=str(path), visible=True)}


def _note(run: Run) -> str:
    note = run.view.note if run.view is not None else ""
    if run.spec.logprobs and not run.has_logprobs:
        note = logprob_note(run)
    return note


def _display(table):
    """Seeds are 64-bit: as text, or the browser rounds them to a double; scores to 3 decimals."""
    return table.astype({"seed": str}).round(3)
