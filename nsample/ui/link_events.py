"""The link events: "Copy link" puts the shown run's request in the page URL (links.py); a page opened from a link
fills the form with it, runs it, and points at the linked card."""
from functools import partial

import gradio as gr

from nsample.errors import NSampleError
from nsample.ui import render
from nsample.ui.layout import STOP_CHOICES
from nsample.ui.links import Link, LinkStore, make_link, model_note, resolve
from nsample.ui.run import ESCAPES, Run

# the address bar shows the link (no reload) and the clipboard gets it where the browser allows
SHOW_LINK_JS = ("(url) => { if (url) { window.history.replaceState(null, '', url);"
                " if (navigator.clipboard) navigator.clipboard.writeText(url).catch(() => {}); } }")


def wire(page, engine, store: LinkStore, loaded, replay, view_inputs: list, view_outputs: list, run_outputs: list,
         on_engine: dict):
    """`loaded` is the page-load event that read the page's URL; `replay` runs a Link's request into the cards.
    Returns the last event of the replay."""
    links, local = page.links, {"queue": False, "api_visibility": "private"}
    links.copy.click(partial(_copy, page, store), [page.page_url, page.run], [links.url, links.note],
                     **local).then(None, links.url, None, js=SHOW_LINK_JS, **local)
    ex = page.explore
    return loaded.then(partial(_open, page, engine.name, store), links.query, [*page.inputs, links.note, links.link],
                **local).then(replay, [links.link, page.tree], run_outputs, api_visibility="private",
                              **on_engine).then(partial(_point, page), [page.run, links.link, ex.sort, ex.k],
                                                view_outputs, **local)


def _copy(page, store: LinkStore, page_url: str, run: Run | None) -> dict:
    if run is None or not run.ended:
        return {page.links.note: "Generate first: a link holds a run's request."}
    url, note = make_link(page_url, run, store)
    return {page.links.url: gr.Textbox(url or "", visible=url is not None), page.links.note: note}


def _open(page, model: str, store: LinkStore, query: str) -> dict:
    """The form filled from the link in the page's URL (nothing without one)."""
    try:
        link = resolve(query, store)
    except NSampleError as e:
        return {page.links.note: f"**This link cannot be opened:** {e.message}", page.links.link: None}
    if link is None:
        return {page.links.link: None}
    s = link.spec
    stop = [_typed(v) for v in s.stop]
    stops = gr.Dropdown(choices=STOP_CHOICES + [v for v in stop if v not in STOP_CHOICES], value=stop)
    values = [s.mode, s.system, s.user, s.prompt, s.n, "" if s.seed is None else str(s.seed), s.temperature,
              s.top_p, s.max_tokens, stops, s.logprobs, s.json_schema]
    branch = " It continues an answer: its cards go on from the text shown above them." if s.continuation else ""
    note = model_note(link, model) or f"Opened from a link: running its request (n={s.n}, seed {s.seed}).{branch}"
    return {**dict(zip(page.inputs, values)), page.links.note: note, page.links.link: link}


def _point(page, run: Run | None, link: Link | None, by: str, k) -> dict:
    """After the replay: the linked card's branch point picked again, and the page's sort applied."""
    if run is None or link is None or not run.ended:
        return {page.explore.view_note: gr.skip()}
    if link.card is not None and 0 <= link.card < len(run.cards):
        text = run.cards[link.card].text
        run.cut = (link.card, link.cut if link.cut is not None and 0 <= link.cut <= len(text) else len(text))
    return render.view(page, run, by, k) or {page.explore.view_note: gr.skip()}


def _typed(stop: str) -> str:
    """A stop string as the stop box shows it (a newline as \\n)."""
    for typed, real in ESCAPES.items():
        stop = stop.replace(real, typed)
    return stop
