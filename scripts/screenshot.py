"""Regenerate the pictures of the README and docs/: run `python app.py` on a free port and, in Chromium, generate once
with logprobs and sort by them (docs/assets/screenshot.png), then continue the best choice from a point in its text,
with tokens shaded by probability (docs/assets/screenshot-branch.png).

    python scripts/screenshot.py                      # embedded SmolLM2-135M-Instruct
    python scripts/screenshot.py --model nsample/tiny-random --out /tmp/shot.png --branch-out /tmp/branch.png
"""
import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"app.py exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    sys.exit("app.py did not start in time")


def capture(base: str, out: Path, branch_out: Path, chromium: str, n: int, seed: int, max_tokens: int) -> None:
    expect.set_options(timeout=300_000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
        page.set_default_timeout(60_000)
        page.goto(base)
        expect(page.locator("#ns-generate")).to_be_visible()
        page.get_by_role("button", name="Haiku about the sea").click()
        for elem_id, value in (("ns-n", n), ("ns-max-tokens", max_tokens)):
            box = page.locator(f"#{elem_id} input[type=number]")
            box.fill(str(value))
            box.press("Enter")
        page.locator("#ns-seed").get_by_role("textbox").fill(str(seed))
        page.locator("#ns-logprobs input").check()
        page.locator("#ns-generate").click()
        expect(page.locator("#ns-status")).to_contain_text("Done")
        page.get_by_label("mean logprob (best first)").check()
        expect(page.locator("#ns-cards .ns-mark", has_text="best of n")).to_be_visible()
        expect(page.locator("#ns-similarity-plot .js-plotly-plot")).to_be_visible()
        page.wait_for_timeout(1500)  # let plotly finish drawing
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out), full_page=True)
        _branch(page, branch_out)
        browser.close()


def _branch(page, out: Path) -> None:
    """Cut the best card after about a third of its tokens, continue it, shade the new cards' tokens."""
    best = page.locator("#ns-cards .ns-card:has(.ns-mark:text('best of n'))")
    tokens = best.locator(".ns-tok")
    tokens.nth(tokens.count() // 3).click()
    expect(best.locator(".ns-cut")).to_be_visible()
    page.get_by_role("button", name=f"Continue #{best.get_attribute('data-index')}", exact=True).click()
    expect(page.locator("#ns-branch-note")).to_be_visible()
    expect(page.locator("#ns-status")).to_contain_text("Done")
    page.locator("#ns-shade input").check()
    page.evaluate("window.scrollTo(0, 0)")  # bounding boxes are relative to the viewport; the clip to the page
    page.wait_for_timeout(500)
    top = page.locator("#ns-breadcrumb").bounding_box()["y"] - 12
    bottom = page.locator("#ns-cards").bounding_box()
    page.screenshot(path=str(out), full_page=True,
                    clip={"x": 0, "y": top, "width": 1400, "height": bottom["y"] + bottom["height"] + 60 - top})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "assets" / "screenshot.png")
    p.add_argument("--branch-out", type=Path, default=ROOT / "docs" / "assets" / "screenshot-branch.png")
    p.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--max-tokens", type=int, default=48)
    args = p.parse_args()
    port = free_port()
    cmd = [sys.executable, "app.py", "--port", str(port)] + (["--model", args.model] if args.model else [])
    env = {k: v for k, v in os.environ.items() if k not in ("NSAMPLE_MODEL", "SYSTEM", "PORT")}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base + "/health", proc)
        capture(base, args.out, args.branch_out, args.chromium, args.n, args.seed, args.max_tokens)
        print(f"wrote {args.out} and {args.branch_out}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
