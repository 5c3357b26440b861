"""The page in headless Chromium, served with the API by the real app factory on a loopback port (tiny model)."""
import contextlib
import json
import re
from pathlib import Path

import openai
import pytest
from live_server import live_server
from playwright.sync_api import expect, sync_playwright
from test_ui_server import wait_idle

from nsample.remote import RemoteConfig, RemoteEngine
from nsample.server import ServerConfig, create_app
from nsample.ui import build_app

CHROMIUM = "/usr/bin/chromium"  # Debian's; Playwright's own browser download is not used
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
T = 60_000  # ms: bound on every wait
expect.set_options(timeout=T)

RECORD_CARDS = """() => {
  window.__snaps = [];
  const grid = document.querySelector('#ns-cards');
  new MutationObserver(() => window.__snaps.push(
    [...grid.querySelectorAll('.ns-card[data-finish]')].filter(c => c.offsetParent !== null)
      .map(c => [c.dataset.finish,
                 c.querySelector('.ns-text .ns-empty') ? 0 : c.querySelector('.ns-text').innerText.length]))
  ).observe(grid, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


@pytest.fixture(scope="module")
def server(tiny_engine):
    with live_server(build_app(tiny_engine)) as base:
        yield base
        wait_idle(tiny_engine)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def remote_server(tiny_engine):
    """The page on a RemoteEngine whose upstream is a second nsample server (the API alone) on the tiny engine."""
    with live_server(create_app(tiny_engine, ServerConfig())) as upstream:
        engine = RemoteEngine(RemoteConfig(upstream + "/v1"))
        try:
            with live_server(build_app(engine)) as base:
                yield base
        finally:
            engine.close()
            wait_idle(tiny_engine)


@contextlib.contextmanager
def open_page(browser, url):
    context = browser.new_context(viewport={"width": 1400, "height": 1800}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(T)
    pg.goto(url)
    expect(pg.locator("#ns-generate")).to_be_visible()
    try:
        yield pg
    finally:
        context.close()


@pytest.fixture
def page(browser, server):
    with open_page(browser, server) as pg:
        yield pg


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")
    expect(box).to_have_value(str(value))


def fill_text(page, elem_id: str, text: str, settle_ms: int = 400) -> None:
    """Types into a text box and checks that the value stays. A box in a tab just opened for the first time is
    mounted then (Gradio renders a tab's children on its first selection), and on a busy machine the mount can
    put the default back after a fill that came too early (seen in CI: a sweep ran on the default temperatures)."""
    box = page.locator(f"#{elem_id} textarea")
    expect(box).to_be_visible()
    for _ in range(20):
        box.fill(text)
        page.wait_for_timeout(settle_ms)
        if box.input_value() == text:
            box.press("Tab")  # blur: the box's last change is sent before the next click
            expect(box).to_have_value(text)
            return
    raise AssertionError(f"#{elem_id} did not keep {text!r}")


def visible_cards(page):
    return page.locator("#ns-cards .ns-card[data-index]:visible")


def test_three_cards_stream_then_report_reproduce_export(page):
    set_number(page, "ns-n", 3)
    set_number(page, "ns-max-tokens", 96)
    expect(visible_cards(page)).to_have_count(3)
    page.evaluate(RECORD_CARDS)
    page.locator("#ns-generate").click()
    expect(page.locator("#ns-status")).to_contain_text("Done: 3 choices")
    cards = visible_cards(page)
    expect(cards).to_have_count(3)
    texts = [t.strip() for t in cards.locator(".ns-text").all_inner_texts()]
    assert all(texts) and len(set(texts)) == 3, texts
    for i in range(3):
        expect(cards.nth(i).locator(".ns-seed")).to_contain_text("seed ")
        expect(cards.nth(i).locator(".ns-tokens")).to_contain_text(" tokens")
    finishes = [cards.nth(i).get_attribute("data-finish") for i in range(3)]
    assert set(finishes) <= {"stop", "length"}, finishes
    # live: at some moment all three cards were running with text in them, and they grew over several updates, or
    # were caught partway (a busy browser applies several stream messages in one task: one snapshot for them all)
    snaps = page.evaluate("window.__snaps")
    live = [s for s in snaps if len(s) == 3 and all(f == "running" and n > 0 for f, n in s)]
    final = [len(t) for t in cards.locator(".ns-text").all_inner_texts()]
    partway = any(n < f for s in live for (_, n), f in zip(s, final))
    assert live and (len({tuple(n for _, n in s) for s in live}) >= 2 or partway), (snaps[:20], final)
    # report: usage table with one row per choice, the two plotly charts and the headline numbers
    expect(page.locator("#ns-usage")).to_be_visible()
    for i in range(3):
        expect(page.locator("#ns-usage")).to_contain_text(cards.nth(i).locator(".ns-seed").inner_text()[5:])
    expect(page.locator("#ns-tokens-plot .js-plotly-plot")).to_be_visible()
    expect(page.locator("#ns-similarity-plot .js-plotly-plot")).to_be_visible()
    expect(page.locator("#ns-headline")).to_contain_text("Vendi score")
    # reproduce choice #1 alone
    page.get_by_role("button", name="Reproduce #1", exact=True).click()
    repro = page.locator("#ns-repro .ns-card")
    expect(repro).to_have_attribute("data-identical", "true")
    assert repro.locator(".ns-text").inner_text().strip() == texts[1]
    # export
    with page.expect_download() as download:
        page.locator("#ns-download-json").click()
    record = json.loads(Path(download.value.path()).read_text())
    # the cards show the text as the browser lays it out ("\r\n" read back as "\n", ...): compare the words
    assert [c["text"].split() for c in record["choices"]] == [t.split() for t in texts]
    assert record["parameters"]["n"] == 3 and record["usage"]["completion_tokens"] > 0


def test_examples_greedy_hint_and_api_help(page, server):
    hint = page.locator("#ns-hint")
    expect(hint).to_be_hidden()
    set_number(page, "ns-temperature", 0)
    expect(hint).to_contain_text("identical")
    set_number(page, "ns-n", 1)
    expect(hint).to_be_hidden()
    page.get_by_role("button", name="Story opening (raw)").click()  # a raw-completion example switches the mode
    expect(page.locator("#ns-prompt textarea")).to_have_value("Once upon a time, in a village by the mountains,")
    expect(page.locator("#ns-user")).to_be_hidden()
    expect(visible_cards(page)).to_have_count(6)
    page.get_by_text("Use it from code").click()
    expect(page.locator("#ns-api-code")).to_contain_text(f'base_url="{server}/v1"')


def test_stop_cancels_in_the_engine(page, tiny_engine):
    set_number(page, "ns-n", 2)
    set_number(page, "ns-max-tokens", 1000)
    page.locator("#ns-generate").click()
    expect(visible_cards(page).first.locator(".ns-tokens")).not_to_have_text("0 tokens")
    page.locator("#ns-stop").click()
    expect(page.locator("#ns-status")).to_contain_text("Stopped")
    expect(visible_cards(page).first).to_have_attribute("data-finish", "cancelled")
    wait_idle(tiny_engine)
    # the partial run is reported like a finished one: table rows, charts, headline
    expect(page.locator("#ns-headline")).to_contain_text("Stopped run, partial texts")
    expect(page.locator("#ns-usage [role=row][data-index]")).to_have_count(2)
    expect(page.locator("#ns-usage")).to_contain_text("cancelled")
    expect(page.locator("#ns-tokens-plot .js-plotly-plot")).to_be_visible()
    expect(page.locator("#ns-similarity-plot .js-plotly-plot")).to_be_visible()


def card_order(page) -> list[int]:
    """The visible cards' indices in reading order (top to bottom, left to right)."""
    boxes = []
    for card in visible_cards(page).all():
        box = card.bounding_box()
        boxes.append((round(box["y"]), box["x"], int(card.get_attribute("data-index"))))
    return [i for _, _, i in sorted(boxes)]


def test_sort_by_logprob_branch_and_go_back(page):
    page.locator("#ns-logprobs input").check()
    set_number(page, "ns-n", 3)
    set_number(page, "ns-max-tokens", 16)
    page.locator("#ns-generate").click()
    status = page.locator("#ns-status")
    expect(status).to_contain_text("Done: 3 choices")
    parent = {i: page.locator(f"#ns-cards .ns-card[data-index='{i}'] .ns-text").inner_text() for i in range(3)}
    # sort by mean logprob: the cards move, best first, and the best one is marked
    page.get_by_label("mean logprob (best first)").check()
    expect(page.locator("#ns-cards .ns-mark", has_text="best of n")).to_have_count(1)
    pills = {i: page.locator(f"#ns-cards .ns-card[data-index='{i}'] .ns-logprob").inner_text() for i in range(3)}
    means = {i: float(re.search(r"logprob (-?[0-9.]+)", pill).group(1)) for i, pill in pills.items()}
    order = card_order(page)
    assert sorted(order) == [0, 1, 2] and [means[i] for i in order] == sorted(means.values(), reverse=True), means
    # shading tints tokens by probability; the compare view marks where two choices differ
    token_background = "getComputedStyle(document.querySelector('#ns-cards .ns-tok[style]')).backgroundColor"
    assert page.evaluate(token_background) == "rgba(0, 0, 0, 0)"
    page.locator("#ns-shade input").check()
    page.wait_for_function(f"{token_background} !== 'rgba(0, 0, 0, 0)'")
    page.get_by_text("Compare two choices").click()
    expect(page.locator("#ns-compare .ns-card")).to_have_count(2)
    expect(page.locator("#ns-compare ins").first).to_be_visible()
    # pick a point in card #1 by clicking a token, then continue from there
    card = page.locator("#ns-cards .ns-card[data-index='1']")
    token = card.locator(".ns-tok").nth(2)
    cut = int(token.get_attribute("data-end"))
    token.click()
    expect(card.locator(".ns-cut")).to_contain_text(f"after {cut} of")
    page.get_by_role("button", name="Continue #1", exact=True).click()
    note = page.locator("#ns-branch-note")
    expect(note).to_contain_text("continues choice #1 of run 1")
    expect(status).to_contain_text("Done: 3 choices")
    assert note.locator(".ns-prefix").inner_text().strip() == parent[1][:cut].strip()
    expect(visible_cards(page)).to_have_count(3)
    child = [t.strip() for t in visible_cards(page).locator(".ns-text").all_inner_texts()]
    assert all(child) and set(child).isdisjoint(t.strip() for t in parent.values())
    crumb = page.locator("#ns-breadcrumb")
    expect(crumb).to_contain_text(f"Run 2 ← #1 of run 1 at {cut} chars")
    # the JSON export holds the tree: the parent, then the child with its branch point
    with page.expect_download() as download:
        page.locator("#ns-download-json").click()
    record = json.loads(Path(download.value.path()).read_text())
    assert [r["run"] for r in record["tree"]] == [1, 2] and record["branch"]["cut"] == cut
    # back to the parent from the breadcrumb
    crumb.get_by_text("Run 1", exact=True).click()
    expect(note).to_be_hidden()
    for i, text in parent.items():
        expect(page.locator(f"#ns-cards .ns-card[data-index='{i}'] .ns-text")).to_have_text(text)


def test_remote_engine_reports_tokens(browser, remote_server):
    with open_page(browser, remote_server) as page:
        set_number(page, "ns-n", 2)
        set_number(page, "ns-max-tokens", 12)
        page.locator("#ns-generate").click()
        expect(page.locator("#ns-status")).to_contain_text("Done: 2 choices")
        counts = [int(re.search(r"(\d+) tokens", t).group(1))
                  for t in visible_cards(page).locator(".ns-tokens").all_inner_texts()]
        assert len(counts) == 2 and all(c > 0 for c in counts), counts
        rows = page.locator("#ns-usage [role=row][data-index]")
        expect(rows).to_have_count(2)
        for i, count in enumerate(counts):
            expect(rows.nth(i)).to_contain_text(str(count))
        expect(page.locator("#ns-tokens-plot .js-plotly-plot")).to_be_visible()


def test_openai_client_on_the_same_server(server, tiny_engine):
    client = openai.OpenAI(base_url=server + "/v1", api_key="x", timeout=60)
    response = client.chat.completions.create(model=tiny_engine.name, n=2, max_tokens=8,
                                              messages=[{"role": "user", "content": "Hello"}])
    assert [c.index for c in response.choices] == [0, 1]
    assert all(c.message.content for c in response.choices)
