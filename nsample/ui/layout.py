"""The page's components, laid out once: inputs, the Choices tab (run tree, view controls, n pre-allocated cards in
a CSS grid, compare, report, export), the Sweep tab, and the API help."""
import json
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from nsample.sampling_params import MAX_STOP
from nsample.ui.alternatives import PICK_ALTERNATIVE_JS
from nsample.ui.panels import (
    AnswersPanel,
    Explore,
    Grid,
    LinkBar,
    SweepTab,
    build_answers,
    build_compare,
    build_explore_bar,
    build_grid,
    build_link_bar,
    build_report,
    build_sweep_tab,
)
from nsample.ui.run import DEFAULTS, UI_DEFAULT_MAX_TOKENS, UI_DEFAULT_N

EXAMPLES_FILE = Path(__file__).with_name("examples.json")  # package data, so an installed wheel has them too
EXAMPLE_FIELDS = ["mode", "system", "user", "prompt", "n", "temperature", "max_tokens"]
STOP_CHOICES = ["\\n", "\\n\\n", ".", "User:"]
MAX_TOKENS_SLIDER = 1024


@dataclass
class Page:
    """Handles on the components the events read and write."""

    mode: gr.Radio
    system: gr.Textbox
    user: gr.Textbox
    prompt: gr.Textbox
    n: gr.Slider
    seed: gr.Textbox
    temperature: gr.Slider
    top_p: gr.Slider
    max_tokens: gr.Slider
    stop: gr.Dropdown
    logprobs: gr.Checkbox
    json_schema: gr.Textbox
    hint: gr.Markdown
    generate: gr.Button
    stop_button: gr.Button
    status: gr.Markdown
    links: LinkBar
    grid: Grid
    explore: Explore
    reproduction: gr.HTML
    answers: AnswersPanel
    table: gr.Dataframe
    tokens_plot: gr.Plot
    similarity_plot: gr.Plot
    headline: gr.Markdown
    download_json: gr.DownloadButton
    download_csv: gr.DownloadButton
    download_pairs: gr.DownloadButton  # the session's preference pairs, TRL DPO JSONL
    sweep: SweepTab
    page_url: gr.Textbox
    api_text: gr.Markdown
    api_code: gr.Code
    run: gr.State  # the Run the cards show
    tree: gr.State  # the RunTree of this page session

    @property
    def inputs(self) -> list:
        """RunSpec.from_ui's arguments, in order."""
        return [self.mode, self.system, self.user, self.prompt, self.n, self.seed, self.temperature, self.top_p,
                self.max_tokens, self.stop, self.logprobs, self.json_schema]


def load_examples(path: Path = EXAMPLES_FILE) -> tuple[list[list], list[str]]:
    """Example prompts from examples.json (beside this file): rows in EXAMPLE_FIELDS order, and their labels."""
    if not path.is_file():
        return [], []
    items = json.loads(path.read_text())
    rows = [[it.get("mode", "chat"), it.get("system", ""), it.get("user", ""), it.get("prompt", ""),
             it.get("n", UI_DEFAULT_N), it.get("temperature", DEFAULTS.temperature),
             it.get("max_tokens", UI_DEFAULT_MAX_TOKENS)] for it in items]
    return rows, [it.get("label", f"Example {i + 1}") for i, it in enumerate(items)]


def build_page(model_name: str, max_n: int, code_note: str = "") -> Page:
    """Lay out the components inside the current gr.Blocks context."""
    n0 = min(UI_DEFAULT_N, max_n)
    gr.Markdown(f"# nsample\nOne prompt, **n** independently seeded choices, computed together by one engine "
                f"and streamed side by side. Model: `{model_name}`.")
    with gr.Row():
        with gr.Column(scale=3):
            mode = gr.Radio([("Chat", "chat"), ("Raw completion", "completion")], value="chat", label="Mode",
                            elem_id="ns-mode")
            system = gr.Textbox(label="System prompt", value="You are a helpful assistant.", lines=1)
            user = gr.Textbox(label="User message", value="Write a haiku about the sea.", lines=3,
                              elem_id="ns-user")
            prompt = gr.Textbox(label="Prompt (raw text, no chat template)", lines=4, visible=False,
                                value="Once upon a time,", elem_id="ns-prompt")
        with gr.Column(scale=2):
            n = gr.Slider(1, max_n, value=n0, step=1, label="n (choices)", elem_id="ns-n")
            seed = gr.Textbox(label="Seed", placeholder="empty = random; choice i uses seed + i",
                              elem_id="ns-seed")
            temperature = gr.Slider(0, 2, value=DEFAULTS.temperature, step=0.05, label="Temperature",
                                    elem_id="ns-temperature")
            top_p = gr.Slider(0, 1, value=DEFAULTS.top_p, step=0.01, label="top_p", elem_id="ns-top-p")
            max_tokens = gr.Slider(1, MAX_TOKENS_SLIDER, value=UI_DEFAULT_MAX_TOKENS, step=1, label="Max tokens",
                                   elem_id="ns-max-tokens")
            stop = gr.Dropdown(STOP_CHOICES, value=[], multiselect=True, allow_custom_value=True,
                               max_choices=MAX_STOP, label=f"Stop strings (up to {MAX_STOP}; type \\n for a newline)")
            logprobs = gr.Checkbox(value=DEFAULTS.logprobs, label="logprobs (rank by likelihood, shade tokens)",
                                   elem_id="ns-logprobs")
            json_schema = gr.Textbox("", label="JSON schema (every choice follows it; empty = free text)", lines=2,
                                     max_lines=12, placeholder='{"type": "object", "properties": {"answer": '
                                     '{"type": "integer"}}, "required": ["answer"]}', elem_id="ns-json-schema")
    hint = gr.Markdown(visible=False, elem_id="ns-hint")
    with gr.Row():
        generate = gr.Button("Generate", variant="primary", elem_id="ns-generate")
        stop_button = gr.Button("Stop", variant="stop", elem_id="ns-stop")
    rows, labels = load_examples()
    if rows:
        gr.Examples(rows, [mode, system, user, prompt, n, temperature, max_tokens], example_labels=labels,
                    label="Examples")
    with gr.Tabs():
        with gr.Tab("Choices", elem_id="ns-choices-tab"):
            bar = build_explore_bar(max_n)
            status = gr.Markdown(elem_id="ns-status")
            links = build_link_bar()
            grid = build_grid(max_n, n0)
            alternatives = gr.HTML(visible=False, elem_id="ns-alternatives", js_on_load=PICK_ALTERNATIVE_JS)
            reproduction = gr.HTML(elem_id="ns-repro")
            answers = build_answers(code_note)
            explore = Explore(*bar, *build_compare(), alternatives)
            headline, tokens_plot, similarity_plot, table, download_json, download_csv, download_pairs = build_report()
        with gr.Tab("Sweep", elem_id="ns-sweep-tab"):
            sweep = build_sweep_tab()
    with gr.Accordion("Use it from code: the OpenAI API on this server", open=False, elem_id="ns-api"):
        page_url = gr.Textbox(visible=False)
        api_text = gr.Markdown()
        api_code = gr.Code(language="python", label="openai client", interactive=False, show_line_numbers=False,
                           elem_id="ns-api-code")
    return Page(mode, system, user, prompt, n, seed, temperature, top_p, max_tokens, stop, logprobs, json_schema,
                hint, generate, stop_button, status, links, grid, explore, reproduction, answers, table, tokens_plot,
                similarity_plot, headline, download_json, download_csv, download_pairs, sweep, page_url, api_text,
                api_code, gr.State(None), gr.State(None))
