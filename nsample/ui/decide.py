"""The Answers panel's work as plain Python: votes (nsample.analysis.vote) and checks (run_checks, pass_at_k) on
what the page received, as per-card chips, a vote bar chart, the majority line and a pass@k curve.

The counting and the estimates are nsample.analysis's; here they become colours, labels and figures. Text only,
so it works for remote engines too.
"""
import html
from dataclasses import dataclass, field

import plotly.graph_objects as go

from nsample import analysis
from nsample.analysis.extractors import answer_key
from nsample.errors import InvalidRequest, check_text
from nsample.ui.run import Run

PALETTE = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777", "#4d7c0f",
           "#7c3aed"]
NO_ANSWER_COLOUR = "#9ca3af"
REGEX = "regex"
EXTRACTORS = [*[p for p in analysis.PRESETS if p != "json:"], "json:", REGEX]
CHECK_KINDS = ("none", "expected answer", "regex", "JSON schema", "Python code")
RESULT_MARK = {"pass": "✓ pass", "fail": "✗ fail", "error": "⚠ error"}


@dataclass
class Votes:
    """A run's vote: each card's answer chip, the bar chart, the majority line."""

    chips: dict[int, str] = field(default_factory=dict)  # choice index -> pill HTML
    keys: dict[int, str] = field(default_factory=dict)  # choice index -> the answer's key (the filter's value)
    counts: tuple = ()  # (answer, count) per row, to tell whether a redraw is needed
    figure: object = None
    majority: str = ""


@dataclass
class Checked:
    """A run's check: each card's pass/fail/error chip, the pass@k curve, a summary line."""

    chips: dict[int, str] = field(default_factory=dict)
    figure: object = None
    summary: str = ""


def extract_spec(preset: str, pattern: str = "") -> str:
    """The extractor the selector names: a preset, 'json:<path>', or the user's regex (group 1 if it has one)."""
    check_text(str(pattern or ""), "extract", "the regex or JSON field path")
    if preset == REGEX:
        if not str(pattern or "").strip():
            raise InvalidRequest("Write a regex for the answer (group 1 is the answer when it has a group).",
                                 param="extract")
        return pattern
    if preset == "json:":
        return "json:" + str(pattern or "").strip()
    return preset


def votes(run: Run, extract: str) -> Votes:
    """Vote over the cards' texts so far; a card without an answer is counted as "no answer"."""
    try:
        table = analysis.vote(run.to_dataframe(), extract)
    except ValueError as e:
        raise InvalidRequest(str(e), param="extract") from None
    n, chips, keys, colours = len(run.cards), {}, {}, []
    for rank, row in enumerate(table.itertuples()):
        none = row.answer == analysis.NO_ANSWER and table.attrs["majority"] != row.answer
        colour = NO_ANSWER_COLOUR if none else PALETTE[rank % len(PALETTE)]
        colours.append(colour)
        key = "" if none else answer_key(str(row.answer))
        label = html.escape(str(row.answer)[:40])
        for i in row.choices:
            keys[int(i)] = key
            chips[int(i)] = (f'<span class="ns-pill ns-answer" style="--c:{colour}" data-answer="{html.escape(key)}" '
                             f'title="answer ({html.escape(table.attrs["extract"])})">answer: {label} · '
                             f'{row.count}/{n}</span>')
    figure = go.Figure(go.Bar(x=[str(a) for a in table["answer"]], y=table["count"].tolist(), marker_color=colours,
                              customdata=[keys[int(c[0])] for c in table["choices"]],
                              hovertemplate="%{x}: %{y} choices<extra></extra>"))
    figure.update_layout(height=260, margin={"l": 40, "r": 10, "t": 30, "b": 40}, yaxis_title="choices",
                         title=f"Votes ({table.attrs['extract']}): click a bar to show only its cards",
                         xaxis_type="category", clickmode="event")
    majority = table.attrs["majority"]
    if majority is None:
        line = f"**No choice has an answer** ({table.attrs['extract']})."
    else:
        top = table.iloc[0]
        seeds = ", ".join(str(s) for s in top["seeds"])
        tied = table.attrs["tied"]
        tie = f" (tied with {', '.join(map(str, tied[1:]))})" if len(tied) > 1 else ""
        line = (f"**Majority answer: {html.escape(str(majority))}**{tie}: {top['count']} of {n} choices "
                f"({top['share']:.0%} agreement), choices {', '.join(map(str, top['choices']))}, seeds {seeds}.")
    counts = tuple(zip(table["answer"].tolist(), table["count"].tolist()))
    return Votes(chips, keys, counts, figure, line)


def make_check(kind: str, value: str, extract: str, allow_code: bool, limits: tuple[float, int]):
    """The analysis check the check row asks for (None for "none"); a code check only where the server allows."""
    value = str(value or "")
    if kind == "none" or kind is None:
        return None
    check_text(value, "check", f"the {kind}")
    if not value.strip() and kind != "JSON schema":
        raise InvalidRequest(f"Write the {kind} to check against.", param="check")
    try:
        if kind == "expected answer":
            return analysis.Expected(value.strip(), extract=extract)
        if kind == "regex":
            return analysis.Matches(value)
        if kind == "JSON schema":
            return analysis.ValidJSON(value if value.strip() else None)
        if kind == "Python code":
            if not allow_code:
                raise InvalidRequest(CODE_OFF, param="check")
            return analysis.CodeCheck(value, timeout_s=limits[0], memory_mb=limits[1])
    except ValueError as e:
        raise InvalidRequest(str(e), param="check") from None
    raise InvalidRequest(f"Unknown check {kind!r}; one of {', '.join(CHECK_KINDS)}.", param="check")


CODE_OFF = ("Python code checks are off on this server: its operator can turn them on with --allow-code-checks "
            "(they run the code on the server).")


def checked(run: Run, check) -> Checked:
    """Each card's verdict and pass@k for k = 1..n (the unbiased estimator), from one run of the check."""
    table = analysis.run_checks(run.to_dataframe(), check)
    curve = analysis.pass_at_k(table)
    chips = {}
    for row in table.itertuples():
        detail = html.escape(str(row.detail or row.result))
        chips[int(row.index)] = (f'<span class="ns-pill ns-check ns-check-{row.result}" title="{detail}">'
                                 f'{RESULT_MARK[row.result]}</span>')
    figure = go.Figure(go.Scatter(x=curve["k"].tolist(), y=curve["pass_at_k"].tolist(), mode="lines+markers",
                                  hovertemplate="pass@%{x} = %{y:.3f}<extra></extra>"))
    figure.update_layout(height=260, margin={"l": 40, "r": 10, "t": 30, "b": 40}, xaxis_title="k", yaxis_title="pass@k",
                         yaxis_range=[0, 1.05], title=f"pass@k, {check.name}")
    a = table.attrs
    summary = (f"**{a['passed']} of {a['n']} pass** ({a['check']}): pass@1 {curve['pass_at_k'].iloc[0]:.3f}, "
               f"pass@{a['n']} {curve['pass_at_k'].iloc[-1]:.3f}" + (f"; {a['errors']} errors" if a["errors"] else ""))
    return Checked(chips, figure, summary)
