"""The page in headless Chromium, served with the API by the real app factory on a loopback port (tiny model)."""
import json
from pathlib import Path

import openai
import pytest
from live_server import live_server
from playwright.sync_api import expect, sync_playwright
from test_ui_server import wait_idle

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
      .map(c => [c.dataset.finish, c.querySelector('.ns-text .ns-empty') ? 0 : c.querySelector('.ns-text').innerText.length]))
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


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1800}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(T)
    pg.goto(server)
    expect(pg.locator("#ns-generate")).to_be_visible()
    yield pg
    context.close()


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")
    expect(box).to_have_value(str(value))


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
    # live: at some moment all three cards were running with text in them, and they grew over several updates
    snaps = page.evaluate("window.__snaps")
    live = [s for s in snaps if len(s) == 3 and all(f == "running" and n > 0 for f, n in s)]
    assert live and len({tuple(n for _, n in s) for s in live}) >= 2, snaps[:20]
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
    assert [c["text"].strip() for c in record["choices"]] == texts
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


def test_openai_client_on_the_same_server(server, tiny_engine):
    client = openai.OpenAI(base_url=server + "/v1", api_key="x", timeout=60)
    response = client.chat.completions.create(model=tiny_engine.name, n=2, max_tokens=8,
                                              messages=[{"role": "user", "content": "Hello"}])
    assert [c.index for c in response.choices] == [0, 1]
    assert all(c.message.content for c in response.choices)
