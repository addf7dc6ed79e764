"""End to end in headless Chromium: the demo config served by uvicorn, a question typed into the page."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEMO_PAGES = ("index.md", "serving.md", "configuration.md", "filters.md")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str:
    """The Debian chromium binary; a failure (not a skip) when RAG_REQUIRE_BROWSER=1."""
    path = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path = None
    if path is None:
        message = "headless Chromium and the python playwright package are needed (apt-get install chromium)"
        if os.environ.get("RAG_REQUIRE_BROWSER") == "1":
            pytest.fail(message + "; RAG_REQUIRE_BROWSER=1 makes this a failure")
        pytest.skip(message)
    return path


@contextlib.contextmanager
def _browser_page(tmp_path: Path, **context_kwargs):
    """A page in a fresh Chromium profile (a new user-data-dir per test)."""
    from playwright.sync_api import sync_playwright

    executable = _chromium()
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=executable, headless=True, args=CHROMIUM_ARGS,
            **context_kwargs)
        try:
            yield context.new_page()
        finally:
            context.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The RAG of configs/default.yaml over a copy of part of the project's docs/ (index in tmp), and its config."""
    from rag.compose.generator import RAG
    from rag.config.rag_config import load_config

    work = tmp_path_factory.mktemp("demo")
    (work / "docs").mkdir()
    for name in DEMO_PAGES:  # a fixed subset keeps the indexing time independent of the docs' growth
        if (ROOT / "docs" / name).exists():
            shutil.copy(ROOT / "docs" / name, work / "docs" / name)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        mp.delenv("RAG_LLM", raising=False)
        config = load_config(ROOT / "configs" / "default.yaml")
        yield RAG.from_config(config), config


@pytest.fixture(scope="module")
def demo_url(demo):
    """The demo served by uvicorn on loopback, without a token."""
    from rag.server.app import create_app
    from rag.testing.live_server import live_server

    rag, config = demo
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(config.server.auth_token_env, raising=False)
        app = create_app(rag, settings=config.server)
    with live_server(app) as url:
        yield url


def test_page_answers_a_question_with_sources(demo_url, tmp_path):
    shot = tmp_path / "page.png"
    errors: list[str] = []
    with _browser_page(tmp_path, viewport={"width": 1100, "height": 1000}) as page:
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(demo_url + "/")
        page.wait_for_selector("#resources code")  # /resources was fetched and rendered
        page.fill("#question", "How do I require a bearer token for the API?")
        page.click("#ask")
        page.wait_for_selector("#status:has-text('Done')", timeout=60_000)
        answer = page.inner_text("#answer")
        labels = page.locator("#sources li .label").all_inner_texts()
        cited = page.locator("#answer a.cite").count()
        labels_of_sentences = page.locator("#answer .sentence").evaluate_all("els => els.map(e => e.dataset.label)")
        coloured = page.locator("#answer .support-high, #answer .support-mid, #answer .support-low, "
                                "#answer .support-off, #answer .support-none").count()
        page.screenshot(path=str(shot), full_page=True)
    assert errors == []
    assert answer.strip() and "I don't know" not in answer
    assert labels and all(label.endswith(".md") for label in labels)
    assert "serving.md" in labels
    assert cited >= 1  # [n] markers became links to the sources
    # One span per answer sentence, coloured by its support label (extractive answers are quoted, so
    # supported; one the checks find not to answer the question is shown as such: support-off).
    assert labels_of_sentences and coloured == len(labels_of_sentences)
    assert "supported" in labels_of_sentences
    assert shot.stat().st_size > 10_000
    if os.environ.get("RAG_SCREENSHOT_DIR"):  # keep a copy for reviewers of CI artefacts
        shutil.copy(shot, Path(os.environ["RAG_SCREENSHOT_DIR"]) / "rag-serve-page.png")


def test_page_shows_a_bad_filter_error(demo_url, tmp_path):
    with _browser_page(tmp_path) as page:
        page.goto(demo_url + "/")
        page.fill("#question", "anything")
        page.click("#options summary")
        page.fill("#filter", '{"page": {"$lessthan": 3}}')
        page.click("#ask")
        page.wait_for_selector("#status.error", timeout=30_000)
        status = page.inner_text("#status")
    assert "unknown operator '$lessthan'" in status


def test_page_asks_for_the_token_when_the_server_requires_one(demo, tmp_path, monkeypatch):
    from rag.server.app import create_app
    from rag.testing.live_server import live_server

    rag, config = demo
    monkeypatch.setenv(config.server.auth_token_env, "browser-s3cret")
    with live_server(create_app(rag, settings=config.server)) as url, _browser_page(tmp_path) as page:
        page.goto(url + "/")
        page.wait_for_selector("#token", state="visible")  # /resources answered 401
        page.fill("#question", "How are tokens compared?")
        page.fill("#token", "wrong")
        page.click("#ask")
        page.wait_for_selector("#status.error")
        refused = page.inner_text("#status")
        page.fill("#token", "browser-s3cret")
        page.click("#ask")
        page.wait_for_selector("#status:has-text('Done')", timeout=60_000)
        sources = page.locator("#sources li").count()
    assert "wrong bearer token" in refused
    assert sources > 0
