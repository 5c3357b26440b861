"""A token's alternatives: the most likely tokens at that position (the engine's top_logprobs), as buttons that
branch the run with the picked one in place of the sampled token."""
import math
from html import escape

from nsample.ui.run import Run

# a click on an alternative's button carries its place in the list
PICK_ALTERNATIVE_JS = ("element.addEventListener('click', (e) => { const b = e.target.closest('[data-alt]');"
                       " if (b && !b.disabled) trigger('select', {alt: Number(b.dataset.alt)}); });")


def alternatives_html(run: Run | None) -> str:
    """The picked token of the shown run and its alternatives with their probabilities, most likely first."""
    if run is None or run.alternatives is None:
        return ""
    index, token, start = run.alternatives
    chosen = run.cards[index].logprobs[token]
    buttons = []
    for j, (token_id, text, logprob) in enumerate(chosen.top):
        p = math.exp(logprob) if not math.isnan(logprob) else float("nan")
        partial = "\ufffd" in text  # a piece of a character: it cannot be put in a prompt as text
        sampled = " ns-sampled" if text == chosen.token else ""
        title = "a partial UTF-8 character" if partial else ("the sampled token" if sampled else "branch from here")
        buttons.append(f'<button type="button" class="ns-alt{sampled}" data-alt="{j}" title="{title}"'
                       f'{" disabled" if partial else ""}><code>{escape(repr(text))}</code> {p:.3f}</button>')
    return (f'<div class="ns-alternatives" data-choice="{index}" data-token="{token}"><div class="ns-head">'
            f'Token {token} of #{index} (after {start} characters): sampled <code>{escape(repr(chosen.token))}'
            f'</code>, p = {math.exp(chosen.logprob):.3f}. Pick an alternative to run n new choices from it.</div>'
            f'<div class="ns-alt-row">{"".join(buttons)}</div></div>')
