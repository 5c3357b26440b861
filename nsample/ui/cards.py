"""One choice as an HTML card: header (index, seed, tokens, finish reason, logprob, marks, answer and check chips)
over the text, and the 👍 / 👎 / best buttons under it; a blind run's card under a neutral label."""
from html import escape

from nsample import analysis
from nsample.ui.run import Card, Run
from nsample.ui.token_spans import spans_html

# a click on a span of a card's text picks the branch point: the `select` event carries where the span ends
# and a click on a rating button (👍 / 👎 / best) carries the rating
PICK_CUT_JS = ("element.addEventListener('click', (e) => { const r = e.target.closest('[data-rate]');"
               " if (r) { trigger('select', {rate: r.dataset.rate}); return; }"
               " const s = e.target.closest('[data-end]');"
               " if (s) trigger('select', {cut: Number(s.dataset.end), tok: s.dataset.tok === undefined ? -1 :"
               " Number(s.dataset.tok), start: Number(s.dataset.start || 0)}); });")
RATE_BUTTONS = [("up", "👍", "good"), ("down", "👎", "bad"), ("best", "★ best", "the best of these cards")]


def card_html(card: Card | None, index: int = 0, mark: str = "", cut: int | None = None, rating: dict | None = None,
              blind: str | None = None, chips: str = "", answer: str | None = None) -> str:
    """The card for one choice (None: a placeholder); a finished card's text is clickable spans, with its rating
    buttons under it. `blind` is the card's neutral label: no index, seed or logprobs are shown."""
    if card is None:
        return (f'<div class="ns-card" data-index="{index}"><div class="ns-head"><span class="ns-index">#{index}'
                '</span></div><div class="ns-text ns-empty">Press Generate.</div></div>')
    finish = card.finish_reason or "running"
    pills = [] if blind else [f'<span class="ns-pill ns-seed" title="seed">seed {card.seed}</span>']
    pills += [_tokens_pill(card), f'<span class="ns-pill ns-finish ns-finish-{escape(finish)}">{escape(finish)}</span>']
    if card.time_s is not None:
        pills.append(f'<span class="ns-pill ns-time">{card.time_s:.2f} s</span>')
    if (mean := card.mean_logprob) is not None and not blind:
        pills.append(f'<span class="ns-pill ns-logprob" title="mean token logprob · perplexity">'
                     f'logprob {mean:.2f} · ppl {analysis.perplexity(mean):.2f}</span>')
    if cut is not None:
        pills.append(f'<span class="ns-pill ns-cut">continue after {cut} of {len(card.text)} chars</span>')
    if mark:
        pills.append(f'<span class="ns-pill ns-mark">{escape(mark)}</span>')
    if not card.text:
        text = '<span class="ns-empty">…</span>'
    elif card.finish_reason:
        text = spans_html(card.text, [] if blind else card.logprobs, cut)
    else:  # still streaming: plain text, re-sent at every update, stays small
        text = escape(card.text)
    rating = rating or {}
    pills.append(chips)  # the Answers panel's answer and check chips
    if rating.get("best"):
        pills.append('<span class="ns-pill ns-best-pill">★ best</span>')
    marked = " ns-marked" if mark and not mark.startswith("rank") else ""
    marked += " ns-best" if rating.get("best") else ""
    label = escape(blind) if blind else f"#{card.index}"
    blind_attr = ' data-blind="true"' if blind else ""
    blind_attr += "" if answer is None else f' data-answer="{escape(answer)}"'
    return (f'<div class="ns-card{marked}" data-index="{card.index}" data-finish="{escape(finish)}"{blind_attr}>'
            f'<div class="ns-head"><span class="ns-index">{label}</span>{"".join(pills)}</div>'
            f'<div class="ns-text">{text}</div>{_rate_bar(rating) if card.finish_reason else ""}</div>')


def run_cards(run: Run) -> list[str]:
    """Every card of `run` with its ranking mark, its rating and, on the chosen card, the picked branch point;
    a blind run's cards under their neutral labels, without marks."""
    blind = run.blind if run.blind is not None and not run.blind.revealed else None
    marks = {} if blind else getattr(run.view, "marks", {})
    votes, checked = run.votes, run.checked
    return [card_html(c, mark=marks.get(c.index, ""), cut=run.cut[1] if run.cut and run.cut[0] == c.index else None,
                      rating=run.ratings.of(c.index), blind=blind.label(c.index) if blind else None,
                      chips=(votes.chips.get(c.index, "") if votes else "")
                      + (checked.chips.get(c.index, "") if checked else ""),
                      answer=votes.keys.get(c.index) if votes else None)
            for c in run.cards]


def _rate_bar(rating: dict) -> str:
    """👍 / 👎 / best buttons; the ones that are on are pressed."""
    on = {"up": rating.get("thumb") == "up", "down": rating.get("thumb") == "down", "best": rating.get("best")}
    buttons = "".join(f'<button type="button" class="ns-rate ns-rate-{key}{" ns-on" if on[key] else ""}" '
                      f'data-rate="{key}" title="{title}" aria-pressed="{str(bool(on[key])).lower()}">{face}</button>'
                      for key, face, title in RATE_BUTTONS)
    return f'<div class="ns-rate-bar">{buttons}</div>'


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
