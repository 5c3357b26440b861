"""One choice as an HTML card: header (index, seed, tokens, finish reason, logprob, marks) over the text."""
from html import escape

from nsample import analysis
from nsample.ui.run import Card, Run
from nsample.ui.token_spans import spans_html

# a click on a span of a card's text picks the branch point: the `select` event carries where the span ends
PICK_CUT_JS = ("element.addEventListener('click', (e) => { const s = e.target.closest('[data-end]');"
               " if (s) trigger('select', {cut: Number(s.dataset.end)}); });")


def card_html(card: Card | None, index: int = 0, mark: str = "", cut: int | None = None) -> str:
    """The card for one choice (None: a placeholder); a finished card's text is clickable spans."""
    if card is None:
        return (f'<div class="ns-card" data-index="{index}"><div class="ns-head"><span class="ns-index">#{index}'
                '</span></div><div class="ns-text ns-empty">Press Generate.</div></div>')
    finish = card.finish_reason or "running"
    pills = [f'<span class="ns-pill ns-seed" title="seed">seed {card.seed}</span>', _tokens_pill(card),
             f'<span class="ns-pill ns-finish ns-finish-{escape(finish)}">{escape(finish)}</span>']
    if card.time_s is not None:
        pills.append(f'<span class="ns-pill ns-time">{card.time_s:.2f} s</span>')
    if (mean := card.mean_logprob) is not None:
        pills.append(f'<span class="ns-pill ns-logprob" title="mean token logprob · perplexity">'
                     f'logprob {mean:.2f} · ppl {analysis.perplexity(mean):.2f}</span>')
    if cut is not None:
        pills.append(f'<span class="ns-pill ns-cut">continue after {cut} of {len(card.text)} chars</span>')
    if mark:
        pills.append(f'<span class="ns-pill ns-mark">{escape(mark)}</span>')
    if not card.text:
        text = '<span class="ns-empty">…</span>'
    elif card.finish_reason:
        text = spans_html(card.text, card.logprobs, cut)
    else:  # still streaming: plain text, re-sent at every update, stays small
        text = escape(card.text)
    marked = " ns-marked" if mark and not mark.startswith("rank") else ""
    return (f'<div class="ns-card{marked}" data-index="{card.index}" data-finish="{escape(finish)}">'
            f'<div class="ns-head"><span class="ns-index">#{card.index}</span>{"".join(pills)}</div>'
            f'<div class="ns-text">{text}</div></div>')


def run_cards(run: Run) -> list[str]:
    """Every card of `run` with its ranking mark and, on the chosen card, the picked branch point."""
    marks = getattr(run.view, "marks", {})
    return [card_html(c, mark=marks.get(c.index, ""), cut=run.cut[1] if run.cut and run.cut[0] == c.index else None)
            for c in run.cards]


def reproduction_html(repro, original_text: str) -> str:
    """The re-run of one choice next to the verdict: identical (token for token) or not."""
    verdict = ("identical, token for token" if repro.identical else "DIFFERENT from the original")
    mark = "✅" if repro.identical else "❌"
    diff = "" if repro.identical else (f'<div class="ns-head">original:</div>'
                                       f'<div class="ns-text">{escape(original_text)}</div>')
    return (f'<div class="ns-card" data-identical="{str(repro.identical).lower()}">'
            f'<div class="ns-head"><span class="ns-index">{mark} Choice #{repro.index} re-run alone</span>'
            f'<span class="ns-pill">n=1</span><span class="ns-pill">seed {repro.seed}</span>'
            f'<span class="ns-pill">{len(repro.token_ids) or "?"} tokens</span><span>{verdict}</span></div>'
            f'<div class="ns-text">{escape(repro.text)}</div>{diff}</div>')


def _tokens_pill(card: Card) -> str:
    if card.counted:
        return (f'<span class="ns-pill ns-tokens" title="counted from the streamed chunks: the upstream '
                f'reports no per-choice token count">≈{card.tokens} tokens</span>')
    return f'<span class="ns-pill ns-tokens">{card.tokens} tokens</span>'
