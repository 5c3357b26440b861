"""Figures have the expected traces, titles, axis labels and hover text."""
import numpy as np
import pandas as pd
import pytest

from nsample.analysis import diversity_vs_temperature, logprob_vs_diversity, similarity_heatmap, tokens_per_choice
from nsample.analysis.sweep import run_frame
from nsample.outputs import Choice, GenerationResult, Timings, TokenLogprob, Usage

TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the cat sat on a mat", "<b>prices</b> fell"]


def result_of(texts: list[str], lengths: list[int], reasons: list[str]) -> GenerationResult:
    choices = [Choice(index=i, seed=50 + i, text=t, token_ids=list(range(k)), finish_reason=r,
                      logprobs=[TokenLogprob(j, "x", -0.5 - i) for j in range(k)])
               for i, (t, k, r) in enumerate(zip(texts, lengths, reasons, strict=True))]
    return GenerationResult([0], choices, Usage(), Timings())


RESULT = result_of(TEXTS, [6, 7, 6, 3], ["stop", "length", "stop", "stop"])


def sweep_frame() -> pd.DataFrame:
    frames, run = [], 0
    for t in (0.5, 1.0):
        for p in (0.9, 1.0):
            texts = TEXTS if t == 1.0 else [TEXTS[0]] * 4
            frames.append(run_frame(result_of(texts, [5] * 4, ["stop"] * 4), run=run, temperature=t, top_p=p,
                                    similarity="jaccard"))
            run += 1
    return pd.concat(frames, ignore_index=True)


def test_tokens_per_choice_has_a_bar_trace_per_finish_reason():
    figure = tokens_per_choice(RESULT)
    assert [trace.name for trace in figure.data] == ["finished: length", "finished: stop"]
    stop = figure.data[1]
    assert list(stop.x) == [0, 2, 3] and list(stop.y) == [6, 6, 3]
    assert figure.layout.title.text == "Tokens per choice (n=4)"
    assert figure.layout.xaxis.title.text == "choice index"
    assert list(figure.layout.xaxis.categoryarray) == [0, 1, 2, 3]  # bars in index order, whatever the colours
    assert figure.layout.yaxis.title.text == "completion tokens"
    assert "seed" in stop.hovertemplate and "tokens" in stop.hovertemplate
    assert "&lt;b&gt;prices&lt;/b&gt; fell" in stop.customdata[2][3]  # text is shown escaped


def test_tokens_per_choice_needs_token_counts():
    with pytest.raises(ValueError, match="token counts"):
        tokens_per_choice(["just", "texts"])


def test_similarity_heatmap_shows_the_matrix_its_measure_and_vendi():
    figure = similarity_heatmap(RESULT, "jaccard")
    (heatmap,) = figure.data
    assert heatmap.type == "heatmap"
    assert np.array(heatmap.z).shape == (4, 4) and np.allclose(np.diag(heatmap.z), 1)
    assert list(heatmap.x) == ["0", "1", "2", "3"]
    assert "word Jaccard" in figure.layout.title.text and "Vendi score" in figure.layout.title.text
    assert figure.layout.xaxis.title.text == figure.layout.yaxis.title.text == "choice index"
    assert "similarity" in heatmap.hovertemplate


def test_similarity_heatmap_of_a_given_matrix_checks_its_shape():
    assert "given similarity" in similarity_heatmap(np.eye(3)).layout.title.text
    with pytest.raises(ValueError, match="square"):
        similarity_heatmap(np.ones((2, 3)))


def test_diversity_vs_temperature_has_a_line_per_top_p_and_a_ceiling_at_n():
    figure = diversity_vs_temperature(sweep_frame())
    assert [trace.name for trace in figure.data] == ["top_p=0.9", "top_p=1"]
    assert list(figure.data[0].x) == [0.5, 1.0]
    low, high = figure.data[0].y
    assert low == pytest.approx(1.0) and high > 2
    assert figure.layout.xaxis.title.text == "temperature"
    assert figure.layout.yaxis.title.text.startswith("Vendi score")
    assert "word Jaccard" in figure.layout.title.text
    assert figure.layout.shapes[0].y0 == 4  # the "all n different" line


def test_diversity_vs_temperature_other_metrics_and_bad_names():
    figure = diversity_vs_temperature(sweep_frame(), metric="distinct_2")
    assert figure.layout.yaxis.title.text.startswith("distinct-2") and not figure.layout.shapes
    with pytest.raises(ValueError, match="unknown metric"):
        diversity_vs_temperature(sweep_frame(), metric="entropy")


def test_logprob_vs_diversity_per_choice():
    figure = logprob_vs_diversity(RESULT, "jaccard")
    (scatter,) = figure.data
    assert list(scatter.y) == pytest.approx([-0.5, -1.5, -2.5, -3.5])
    assert scatter.x[3] == pytest.approx(1.0)  # shares no word with the others
    assert figure.layout.yaxis.title.text.startswith("mean token logprob")
    assert figure.layout.xaxis.title.text.startswith("distinctness")


def test_logprob_vs_diversity_per_grid_point_of_a_sweep():
    figure = logprob_vs_diversity(sweep_frame())
    assert [trace.name for trace in figure.data] == ["top_p=0.9", "top_p=1"]
    assert list(figure.data[0].text) == ["T=0.5", "T=1"]
    assert figure.layout.xaxis.title.text.startswith("Vendi score")


def test_logprob_vs_diversity_needs_logprobs():
    with pytest.raises(ValueError, match="logprobs=True"):
        logprob_vs_diversity(["a b", "c d"], "edit")
