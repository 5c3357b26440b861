"""The Answers panel's events: votes by the chosen extractor (live while choices stream), a check on every card
with a pass@k curve, and a click on a vote bar that shows only its cards (in the browser, no server trip)."""
import asyncio
from functools import partial

import gradio as gr

from nsample.cli import PageConfig
from nsample.errors import NSampleError
from nsample.ui import decide, render
from nsample.ui.cards import run_cards
from nsample.ui.run import Run

# a click on a bar of the vote chart shows only the cards with that answer; a second click, a double click
# or Generate shows all
VOTE_FILTER_JS = """() => {
  const clear = () => { const st = document.getElementById('ns-answer-filter'); if (st) { st.textContent = '';
    st.dataset.key = ''; } };
  const bind = () => document.querySelectorAll('#ns-vote-plot .js-plotly-plot').forEach((gd) => {
    if (gd.__nsBound || !gd.on) return;
    gd.__nsBound = true;
    gd.on('plotly_doubleclick', clear);  // a quick second click on a bar is a double click to plotly
    gd.on('plotly_click', (ev) => {
      const key = String(ev.points[0].customdata);
      let st = document.getElementById('ns-answer-filter');
      if (!st) { st = document.createElement('style'); st.id = 'ns-answer-filter'; document.head.appendChild(st); }
      if (st.textContent && st.dataset.key === key) { clear(); return; }
      st.dataset.key = key;
      st.textContent = '#ns-cards > .column:not(:has(.ns-card[data-answer=' + JSON.stringify(key) + ']))'
        + ' { display: none !important; }';
    });
  });
  new MutationObserver(bind).observe(document.body, {childList: true, subtree: true});
  document.addEventListener('click', (e) => { if (e.target.closest('#ns-generate')) clear(); });
  bind();
}"""


def code_note(config: PageConfig) -> str:
    if not config.allow_code_checks:
        return "<sub>" + decide.CODE_OFF + "</sub>"
    return (f"<sub>Python code checks are on: each choice runs `check(text)` in its own subprocess, stopped after "
            f"{config.code_check_timeout_s:g} s or {config.code_check_memory_mb} MB; not a security sandbox, the "
            "code runs as this server's user.</sub>")


def wire(page, config: PageConfig):
    """Wire the panel's own events; returns how to chain the panel's update after a run's event."""
    a, local = page.answers, {"api_visibility": "private"}
    inputs, outputs = [page.run, *a.inputs], [*page.grid.cards, *render.decided(page, None)]
    fn = partial(_decide, page, config)
    # always_last: a change made while an earlier one is answered runs after it (Gradio's default drops it)
    gr.on([a.extract.input, a.pattern.submit, a.pattern.blur, a.check_button.click, a.check_value.submit], fn, inputs,
          outputs, trigger_mode="always_last", **local)
    return lambda event: event.then(fn, inputs, outputs, **local)


def live(page, run: Run, extract: tuple[str, str] | None) -> dict:
    """While a run streams: each card's answer so far, and the chart when the counts changed."""
    if extract is None:
        return {}
    before = run.votes
    try:
        run.votes = decide.votes(run, decide.extract_spec(*extract))
    except NSampleError:
        return {}
    if before is not None and before.counts == run.votes.counts:
        return {}
    return {page.answers.vote_plot: gr.update(value=run.votes.figure, visible=True),
            page.answers.majority: run.votes.majority}


async def _decide(page, config: PageConfig, run: Run | None, preset: str, pattern: str, kind: str, value: str):
    """Votes and the check on an ended run; a bad extractor or check is said in the panel, never a failed page."""
    a = page.answers
    if run is None or not run.ended:
        return {a.majority: gr.skip()}
    out = {}
    try:
        extract = decide.extract_spec(preset, pattern)
        run.votes = decide.votes(run, extract)
    except NSampleError as e:
        run.votes, extract = None, None
        out[a.majority] = f"**Cannot extract answers:** {e.message}"
    try:
        check = decide.make_check(kind, value, extract or "text", config.allow_code_checks,
                                  (config.code_check_timeout_s, config.code_check_memory_mb))
        run.checked = None if check is None else await asyncio.to_thread(decide.checked, run, check)
    except NSampleError as e:
        run.checked = None
        out[a.check_summary] = f"**Check refused:** {e.message}"
    return {**dict(zip(page.grid.cards, run_cards(run))), **render.decided(page, run), **out}
