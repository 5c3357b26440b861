"""One choice as an HTML card: header (index, seed, tokens, finish reason) over the text; and the grid's CSS."""
from html import escape

from nsample.ui.run import Card

CSS = """
#ns-cards { display: grid !important; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: 12px; }
#ns-cards { align-items: stretch !important; }
#ns-cards > .column { min-width: 0 !important; width: auto !important; justify-content: space-between; }
#ns-cards .ns-card-slot { flex-grow: 1; display: flex; flex-direction: column; }
#ns-cards .ns-card-slot > div, #ns-cards .ns-card-slot .ns-card { flex-grow: 1; }
.ns-card { border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 10px 12px;
           background: var(--background-fill-secondary); min-height: 120px; }
.ns-head { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; font-size: 12px;
           color: var(--body-text-color-subdued); margin-bottom: 6px; }
.ns-index { font-weight: 700; font-size: 14px; color: var(--body-text-color); margin-right: 4px; }
.ns-pill { border-radius: 999px; padding: 1px 8px; background: var(--background-fill-primary);
           border: 1px solid var(--border-color-primary); }
.ns-finish-running { color: var(--color-accent); }
.ns-finish-stop { color: #15803d; border-color: #15803d; }
.ns-finish-length { color: #b45309; border-color: #b45309; }
.ns-finish-cancelled { color: #b91c1c; border-color: #b91c1c; }
.ns-text { white-space: pre-wrap; word-break: break-word; font-size: 14px; line-height: 1.45;
           color: var(--body-text-color); max-height: 420px; overflow-y: auto; }
.ns-empty { color: var(--body-text-color-subdued); font-style: italic; }
#ns-repro .ns-text { border-left: 3px solid var(--color-accent); padding-left: 8px; }
"""


def card_html(card: Card | None, index: int = 0) -> str:
    """The card for one choice; None = a placeholder before the first Generate."""
    if card is None:
        return (f'<div class="ns-card" data-index="{index}"><div class="ns-head"><span class="ns-index">#{index}'
                '</span></div><div class="ns-text ns-empty">Press Generate.</div></div>')
    finish = card.finish_reason or "running"
    time_pill = f'<span class="ns-pill ns-time">{card.time_s:.2f} s</span>' if card.time_s is not None else ""
    text = escape(card.text) if card.text else '<span class="ns-empty">…</span>'
    return (f'<div class="ns-card" data-index="{card.index}" data-finish="{finish}">'
            f'<div class="ns-head"><span class="ns-index">#{card.index}</span>'
            f'<span class="ns-pill ns-seed" title="seed">seed {card.seed}</span>'
            f'<span class="ns-pill ns-tokens">{card.tokens} tokens</span>'
            f'<span class="ns-pill ns-finish ns-finish-{escape(finish)}">{escape(finish)}</span>{time_pill}</div>'
            f'<div class="ns-text">{text}</div></div>')


def reproduction_html(repro, original_text: str) -> str:
    """The re-run of one choice next to the verdict: identical (token for token) or not."""
    verdict = ("identical, token for token" if repro.identical else "DIFFERENT from the original")
    mark = "✅" if repro.identical else "❌"
    diff = "" if repro.identical else (f'<div class="ns-head">original:</div>'
                                       f'<div class="ns-text">{escape(original_text)}</div>')
    return (f'<div class="ns-card" data-identical="{str(repro.identical).lower()}">'
            f'<div class="ns-head"><span class="ns-index">{mark} Choice #{repro.index} re-run alone</span>'
            f'<span class="ns-pill">n=1</span><span class="ns-pill">seed {repro.seed}</span>'
            f'<span class="ns-pill">{len(repro.token_ids)} tokens</span><span>{verdict}</span></div>'
            f'<div class="ns-text">{escape(repro.text)}</div>{diff}</div>')
