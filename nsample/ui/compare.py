"""Two choices side by side with the spans where they differ highlighted, aligned word by word by difflib."""
import difflib
import re
from html import escape

from nsample.ui.run import Run

PIECE = re.compile(r"\s*(?:\w+|[^\w\s])|\s+")  # a word or punctuation mark with the whitespace before it


def diff_pieces(a: str, b: str) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]], float]:
    """Each text as (piece, differs) pairs, and difflib's similarity ratio of the two piece sequences."""
    pa, pb = PIECE.findall(a), PIECE.findall(b)
    matcher = difflib.SequenceMatcher(None, pa, pb, autojunk=False)
    left, right = [], []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        left.append(("".join(pa[a0:a1]), op != "equal"))
        right.append(("".join(pb[b0:b1]), op != "equal"))
    return [p for p in left if p[0]], [p for p in right if p[0]], matcher.ratio()


def compare_html(run: Run | None, a: int | None, b: int | None) -> str:
    """Choice `a` next to choice `b`: words only in A struck through in red, words only in B in green."""
    if run is None or a is None or b is None or not (0 <= a < len(run.cards) and 0 <= b < len(run.cards)):
        return ""
    left, right, ratio = diff_pieces(run.cards[a].text, run.cards[b].text)
    same = sum(len(p) for p, differs in left if not differs)
    return (f'<div class="ns-head">#{a} vs #{b}: difflib ratio <b>{ratio:.2f}</b> · {same} of '
            f'{len(run.cards[a].text)} characters of #{a} shared</div><div class="ns-compare">'
            f'{_side(a, left, "del")}{_side(b, right, "ins")}</div>')


def _side(index: int, pieces: list[tuple[str, bool]], tag: str) -> str:
    body = "".join(f"<{tag}>{escape(p)}</{tag}>" if differs else escape(p) for p, differs in pieces)
    return (f'<div class="ns-card" data-side="{tag}"><div class="ns-head"><span class="ns-index">#{index}</span>'
            f'</div><div class="ns-text">{body}</div></div>')
