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


def _ask_in_page(url: str, tmp_path: Path, question: str) -> dict:
    """Type `question` into the page at `url`, wait for the answer, and read what the page shows."""
    shot = tmp_path / "page.png"
    errors: list[str] = []
    with _browser_page(tmp_path, viewport={"width": 1100, "height": 1000}) as page:
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url + "/")
        page.wait_for_selector("#resources code")  # /resources was fetched and rendered
        page.fill("#question", question)
        page.click("#ask")
        page.wait_for_selector("#status:has-text('Done')", timeout=60_000)
        seen = {
            "errors": errors,
            "answer": page.inner_text("#answer"),
            "answer_class": page.get_attribute("#answer", "class") or "",
            "labels": page.locator("#sources li .label").all_inner_texts(),
            "cited_sources": page.locator("#sources li.cited .label").all_inner_texts(),
            "answer_links": page.locator("#answer a.cite").count(),
            "passage": page.inner_text("#passage") if page.is_visible("#passage") else "",
            "passage_links": page.locator("#passage a.cite").count(),
            "answerer": page.inner_text("#answerer") if page.is_visible("#answerer") else "",
            "sentence_labels": page.locator("#answer .sentence").evaluate_all("els => els.map(e => e.dataset.label)"),
            "coloured": page.locator("#answer .support-high, #answer .support-mid, #answer .support-low, "
                                     "#answer .support-off, #answer .support-none").count(),
        }
        page.screenshot(path=str(shot), full_page=True)
    seen["shot"] = shot
    return seen


def test_page_shows_the_fallbacks_not_sure_answer_with_the_closest_passage_and_its_source(demo_url, tmp_path):
    # The demo has no model: the offline fallback does not assert an answer it is not sure of; the page
    # shows that, the closest passage with a link to its source, and who answered.
    seen = _ask_in_page(demo_url, tmp_path, "How do I require a bearer token for the API?")
    assert seen["errors"] == []
    assert seen["labels"] and all(label.endswith(".md") for label in seen["labels"])
    assert "serving.md" in seen["labels"]
    assert "not sure" in seen["answer"]
    assert "support-off" in seen["answer_class"]  # shown greyed, not as an answer
    assert "Bearer" in seen["passage"] and "serving.md" in seen["passage"]
    assert seen["passage_links"] == 1 and seen["cited_sources"] == ["serving.md"]
    assert seen["answerer"].startswith("Answered by the offline extractive fallback")
    assert seen["shot"].stat().st_size > 10_000
    if os.environ.get("RAG_SCREENSHOT_DIR"):  # keep a copy for reviewers of CI artefacts
        shutil.copy(seen["shot"], Path(os.environ["RAG_SCREENSHOT_DIR"]) / "rag-serve-page.png")


def test_page_links_a_models_citations_and_colours_its_sentences_by_support(demo, tmp_path):
    # A chat model (LangChain's fake) answers with [n] markers: they become links to the sources, each
    # sentence is coloured by its support label, and the sentence quoting its source is "supported".
    from langchain_core.language_models import FakeListChatModel

    from rag.compose.generator import RAG
    from rag.server.app import create_app
    from rag.testing.live_server import live_server

    _, config = demo
    quoted = ("Set the environment variable named by `server.auth_token_env` (default `RAG_API_TOKEN`) and every "
              "endpoint except `/health` and the page itself needs `Authorization: Bearer <token>`")
    question = "How do I require a bearer token for the API?"
    plain = RAG.from_config(config, llm=FakeListChatModel(responses=["unused"]))
    context = plain.chain().invoke(question)["context"]
    n = next(i for i, doc in enumerate(context, 1) if "Authorization: Bearer" in doc.page_content)
    model = FakeListChatModel(responses=[f"{quoted} [{n}]. The moon is made of cheese [{n}]."] * 3)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(config.server.auth_token_env, raising=False)
        app = create_app(RAG.from_config(config, llm=model), settings=config.server)
    with live_server(app) as url:
        seen = _ask_in_page(url, tmp_path, question)
    assert seen["errors"] == []
    assert seen["answer_links"] == 2  # both [n] markers are links
    assert "serving.md" in seen["cited_sources"]
    assert len(seen["sentence_labels"]) == 2 and seen["coloured"] == 2
    assert seen["sentence_labels"][0] == "supported"
    assert seen["sentence_labels"][1] != "supported"  # the cheese is not in serving.md
    assert seen["passage"] == ""  # an answer, not a not-sure one: no closest passage
    assert seen["answerer"].startswith("Answered by FakeListChatModel")


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
