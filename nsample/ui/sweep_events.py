"""The Sweep tab's events: run nsample.analysis.sweep on the page's prompt with a progress bar, or stop it."""
import threading
from functools import partial

import gradio as gr

from nsample.cli import PageConfig
from nsample.errors import NSampleError
from nsample.ui import decide
from nsample.ui.run import RunSpec
from nsample.ui.sweep import SweepStopped, parse_values, pass_figure, pass_rates, run_sweep


def wire(page, engine, on_engine: dict, config: PageConfig | None = None) -> None:
    tab = page.sweep
    outputs = [tab.status, tab.diversity_plot, tab.quality_plot, tab.table, tab.flag, tab.pass_plot]
    inputs = [tab.temperatures, tab.top_ps, *page.inputs, *page.answers.inputs]  # the check: the Answers panel's
    event = tab.run.click(partial(_sweep, engine, page, config or PageConfig()), inputs, outputs,
                          api_name="sweep", api_visibility="undocumented", **on_engine)
    tab.stop.click(_stop, tab.flag, tab.status, cancels=[event], queue=False, api_visibility="private")


def _sweep(engine, page, config: PageConfig, temperatures, top_ps, *values,
           progress=gr.Progress()):  # noqa: B008 (Gradio's idiom)
    """Runs in a worker thread (sweep() blocks); the first update hands the page a flag that Stop sets. With a
    check in the Answers panel, pass@1 and pass@n per temperature come too."""
    tab = page.sweep
    *values, preset, pattern, kind, value = values
    try:
        spec = RunSpec.from_ui(*values)
        temps = parse_values(temperatures, "temperature", 0.0, 2.0)
        tops = parse_values(top_ps, "top_p", 0.0, 1.0)
        extract = decide.extract_spec(preset, pattern)
        check = decide.make_check(kind, value, extract, config.allow_code_checks,
                                  (config.code_check_timeout_s, config.code_check_memory_mb))
    except NSampleError as e:
        raise gr.Error(e.message) from None
    flag = threading.Event()
    total = len(temps) * len(tops)
    yield {tab.status: f"Sweeping {total} points of n={spec.n}…", tab.flag: flag,
           tab.diversity_plot: gr.Plot(visible=False), tab.quality_plot: gr.Plot(visible=False),
           tab.table: gr.Dataframe(visible=False), tab.pass_plot: gr.Plot(visible=False)}

    def tick(done: int, points: int) -> None:
        if flag.is_set():
            raise SweepStopped
        progress((done, points), desc="sweep", unit="points")

    try:
        result = run_sweep(engine, spec, temps, tops, tick)
    except SweepStopped:
        yield {tab.status: "Sweep stopped."}
        return
    except NSampleError as e:
        raise gr.Error(e.message) from None
    passes = None if check is None else pass_figure(pass_rates(result.frame, check), check.name)
    yield {tab.status: f"Done: {total} points × {spec.n} choices. {result.note}".strip(),
           tab.pass_plot: gr.Plot(passes, visible=passes is not None),
           tab.diversity_plot: gr.Plot(result.diversity_figure, visible=True),
           tab.quality_plot: gr.Plot(result.quality_figure, visible=result.quality_figure is not None),
           tab.table: gr.Dataframe(result.summary.round(3), visible=True)}


def _stop(flag: threading.Event | None):
    if flag is not None:
        flag.set()
    return "Stopping the sweep after the point under way…"
