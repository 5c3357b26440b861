"""The page's panels, each a small group of components: the card grid, the explore bar (run tree, sort, shading),
the compare view, the report, and the Sweep tab."""
from dataclasses import dataclass

import gradio as gr

from nsample.ui.cards import PICK_CUT_JS, card_html
from nsample.ui.decide import CHECK_KINDS, EXTRACTORS
from nsample.ui.ranking import SORTS
from nsample.ui.sweep import MAX_POINTS


@dataclass
class Grid:
    columns: list[gr.Column]
    cards: list[gr.HTML]
    reproduce_buttons: list[gr.Button]
    continue_buttons: list[gr.Button]
    order: gr.HTML  # a <style> element that orders the columns as the ranking says
    notes: list[gr.Textbox]  # the person's optional note per card
    button_rows: list[gr.Row]  # Reproduce / Continue, hidden while a blind run is unrevealed (they name the index)


@dataclass
class Explore:
    breadcrumb: gr.Radio  # the path from the root run to the shown run; pick one to go back
    runs: gr.Dropdown  # every run of the page, as a tree
    branch_note: gr.HTML  # what a branch continues
    sort: gr.Radio
    k: gr.Slider
    shade: gr.Checkbox
    blind: gr.Checkbox
    view_note: gr.Markdown
    compare_a: gr.Dropdown
    compare_b: gr.Dropdown
    compare: gr.HTML
    alternatives: gr.HTML  # a clicked token's top alternatives, each a button that branches from it


@dataclass
class AnswersPanel:
    extract: gr.Dropdown  # an extractor preset, "json:" (a field path) or "regex"
    pattern: gr.Textbox  # the regex (group 1) or the JSON field path
    majority: gr.Markdown
    vote_plot: gr.Plot
    check_kind: gr.Radio
    check_value: gr.Textbox
    check_button: gr.Button
    code_note: gr.Markdown  # whether this server runs Python code checks, and under which limits
    check_summary: gr.Markdown
    pass_plot: gr.Plot

    @property
    def inputs(self) -> list:
        return [self.extract, self.pattern, self.check_kind, self.check_value]


@dataclass
class LinkBar:
    copy: gr.Button  # puts the shown run's request in the page URL and the clipboard
    url: gr.Textbox  # the link, to copy by hand
    note: gr.Markdown  # how long it is, a short id's limits, or a link made on another model
    query: gr.Textbox  # the page's own query string at load (hidden)
    link: gr.State  # the links.Link the page was opened with, replayed once


@dataclass
class SweepTab:
    temperatures: gr.Textbox
    top_ps: gr.Textbox
    run: gr.Button
    stop: gr.Button
    status: gr.Markdown
    diversity_plot: gr.Plot
    quality_plot: gr.Plot
    table: gr.Dataframe
    pass_plot: gr.Plot  # pass@1 and pass@n vs temperature, with the Answers panel's check
    flag: gr.State  # the running sweep's stop flag


def build_grid(max_n: int, n0: int) -> Grid:
    columns, cards, reproduce, branch, notes, rows = [], [], [], [], [], []
    order = gr.HTML(elem_id="ns-order")
    with gr.Row(elem_id="ns-cards"):
        for i in range(max_n):
            with gr.Column(visible=i < n0, min_width=260, elem_id=f"ns-col-{i}") as col:
                cards.append(gr.HTML(card_html(None, i), elem_classes="ns-card-slot", js_on_load=PICK_CUT_JS))
                notes.append(gr.Textbox(placeholder="note (optional, kept with the ratings)", show_label=False,
                                        lines=1, max_lines=3, container=False, elem_classes="ns-note",
                                        elem_id=f"ns-note-{i}"))
                with gr.Row(elem_classes="ns-card-buttons") as row:
                    reproduce.append(gr.Button(f"Reproduce #{i}", size="sm", min_width=100,
                                               elem_classes="ns-reproduce"))
                    branch.append(gr.Button(f"Continue #{i}", size="sm", min_width=100,
                                            elem_classes="ns-continue"))
            columns.append(col)
            rows.append(row)
    return Grid(columns, cards, reproduce, branch, order, notes, rows)


def build_answers(code_note: str) -> AnswersPanel:
    with gr.Accordion("Answers and checks", open=True, elem_id="ns-answers"):
        with gr.Row(equal_height=True):
            extract = gr.Dropdown(EXTRACTORS, value="last number", label="Answer extractor", scale=1,
                                  elem_id="ns-extract")
            pattern = gr.Textbox("", label="Regex (group 1 is the answer) or JSON field path", scale=2,
                                 placeholder=r"e.g. answer is (\d+)   or   result.value", elem_id="ns-extract-pattern")
        majority = gr.Markdown(elem_id="ns-majority")
        vote_plot = gr.Plot(show_label=False, visible=False, elem_id="ns-vote-plot")
        with gr.Row(equal_height=True):
            kind = gr.Radio(list(CHECK_KINDS), value="none", label="Check each choice", scale=2,
                            elem_id="ns-check-kind")
            value = gr.Textbox("", label="Expected answer, regex, JSON schema, or Python defining check(text) -> bool",
                               lines=2, max_lines=12, scale=3, elem_id="ns-check-value")
            button = gr.Button("Check", scale=0, min_width=100, elem_id="ns-check")
        note = gr.Markdown(code_note, elem_id="ns-code-note")
        summary = gr.Markdown(elem_id="ns-check-summary")
        pass_plot = gr.Plot(show_label=False, visible=False, elem_id="ns-pass-plot")
    return AnswersPanel(extract, pattern, majority, vote_plot, kind, value, button, note, summary, pass_plot)


def build_link_bar() -> LinkBar:
    with gr.Row(equal_height=True):
        copy = gr.Button("🔗 Copy link", size="sm", scale=0, min_width=140, visible=False, elem_id="ns-copy-link")
        url = gr.Textbox(show_label=False, container=False, visible=False, interactive=False, buttons=["copy"],
                         scale=4, elem_id="ns-link")
    note = gr.Markdown(elem_id="ns-link-note")
    return LinkBar(copy, url, note, gr.Textbox(visible=False), gr.State(None))


def build_explore_bar(max_n: int) -> tuple:
    """The run tree's breadcrumb and outline, the branch note, and the view controls (sort, k, shading)."""
    with gr.Row():
        breadcrumb = gr.Radio([], label="Path to this run (pick one to go back)", visible=False, scale=3,
                              elem_id="ns-breadcrumb")
        runs = gr.Dropdown([], label="All runs on this page", visible=False, scale=2, elem_id="ns-runs")
    branch_note = gr.HTML(visible=False, elem_id="ns-branch-note")
    with gr.Row(equal_height=True):
        sort = gr.Radio([(label, key) for key, label in SORTS.items()], value="index", label="Sort cards by",
                        scale=3, elem_id="ns-sort")
        k = gr.Slider(1, max_n, value=min(2, max_n), step=1, label="k (most diverse)", scale=1, elem_id="ns-k")
        shade = gr.Checkbox(label="Shade tokens by probability", value=False, scale=1, elem_id="ns-shade")
        blind = gr.Checkbox(label="Blind: shuffle, hide index, seed, logprobs and sort until a best pick", value=False,
                            scale=1, elem_id="ns-blind")
    view_note = gr.Markdown(elem_id="ns-view-note")
    gr.Markdown("<sub>Click a word in a finished card to pick where **Continue** cuts it (default: the whole "
                "text); Continue runs n new choices from there with the settings above. With logprobs on, the "
                "click also shows that token's alternatives: pick one to branch from it. Rate cards with 👍 / 👎 "
                "and ★ best: **Download preference pairs** writes best or 👍 against 👎 and unrated, for each "
                "rated run of this page.</sub>")
    return breadcrumb, runs, branch_note, sort, k, shade, blind, view_note


def build_compare() -> tuple:
    with gr.Accordion("Compare two choices", open=False, elem_id="ns-compare-panel"):
        with gr.Row():
            a = gr.Dropdown([], label="Choice A", elem_id="ns-compare-a")
            b = gr.Dropdown([], label="Choice B", elem_id="ns-compare-b")
        compare = gr.HTML(elem_id="ns-compare")
    return a, b, compare


def build_report() -> tuple:
    headline = gr.Markdown(elem_id="ns-headline")
    with gr.Row():
        tokens_plot = gr.Plot(label="Completion tokens per choice", visible=False, elem_id="ns-tokens-plot")
        similarity_plot = gr.Plot(label="Pairwise similarity", visible=False, elem_id="ns-similarity-plot")
    table = gr.Dataframe(label="Usage (one row per choice)", interactive=False, wrap=True, visible=False,
                         elem_id="ns-usage")
    with gr.Row():
        download_json = gr.DownloadButton("Download runs (JSON)", visible=False, elem_id="ns-download-json")
        download_csv = gr.DownloadButton("Download table (CSV)", visible=False, elem_id="ns-download-csv")
        download_pairs = gr.DownloadButton("Download preference pairs (DPO JSONL)", visible=False,
                                           elem_id="ns-download-pairs")
    return headline, tokens_plot, similarity_plot, table, download_json, download_csv, download_pairs


def build_sweep_tab() -> SweepTab:
    gr.Markdown("Run the prompt above with n choices at every temperature (and top_p) below, the same seed at "
                f"every point (at most {MAX_POINTS} points), and see how diversity and likelihood trade off.")
    with gr.Row():
        temperatures = gr.Textbox("0.3, 0.7, 1.0, 1.3", label="Temperatures", elem_id="ns-sweep-temperatures")
        top_ps = gr.Textbox("1.0", label="top_p values", elem_id="ns-sweep-top-p")
    with gr.Row():
        run = gr.Button("Run sweep", variant="primary", elem_id="ns-sweep-run")
        stop = gr.Button("Stop sweep", variant="stop", elem_id="ns-sweep-stop")
    status = gr.Markdown(elem_id="ns-sweep-status")
    with gr.Row():
        diversity_plot = gr.Plot(label="Diversity vs temperature", visible=False, elem_id="ns-sweep-diversity")
        quality_plot = gr.Plot(label="Logprob vs diversity", visible=False, elem_id="ns-sweep-quality")
    pass_plot = gr.Plot(label="pass@1 and pass@n vs temperature (the check of the Choices tab's Answers panel)",
                        visible=False, elem_id="ns-sweep-pass")
    table = gr.Dataframe(label="One row per grid point", interactive=False, visible=False, elem_id="ns-sweep-table")
    return SweepTab(temperatures, top_ps, run, stop, status, diversity_plot, quality_plot, table, pass_plot,
                    gr.State(None))
