"""Web pages read as a reader sees them: main content only, headings, code blocks whole, tables as rows."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.indexing.chunking import TokenChunker
from rag.indexing.html_text import html_to_text
from rag.indexing.loaders import load_file
from rag.indexing.tokens import ApproximateTokenizer

SPHINX_PAGE = """<!DOCTYPE html><html><head><title>Logging HOWTO &#8212; Widgets 2.1 documentation</title>
<script>var DOCUMENTATION_OPTIONS = {};</script></head><body>
<div class="related" role="navigation"><h3>Navigation</h3><ul><li><a href="genindex.html">index</a></li>
<li><a href="next.html">next</a> |</li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper">
<div class="body" role="main">
<section id="logging-howto"><h1>Logging HOWTO<a class="headerlink" href="#logging-howto" title="Link">¶</a></h1>
<p>Widgets log through the <code class="docutils literal">logging</code> module.</p>
<section id="basic"><h2>Basic use<a class="headerlink" href="#basic">¶</a></h2>
<div class="highlight-python notranslate"><div class="highlight"><pre><span></span><span class="c1"># configure once</span>
<span class="kn">import</span> <span class="nn">logging</span>
<span class="k">def</span> <span class="nf">setup</span><span class="p">():</span>
    <span class="c1"># a comment, not a heading</span>
    <span class="n">logging</span><span class="o">.</span><span class="n">basicConfig</span><span class="p">()</span>
</pre></div></div>
<table class="docutils"><thead><tr><th>Level</th><th>Value</th></tr></thead>
<tbody><tr><td><p>DEBUG</p></td><td>10</td></tr><tr><td>ERROR</td><td>40</td></tr></tbody></table>
</section></section></div></div></div>
<div class="sphinxsidebar" role="navigation" aria-label="main navigation"><div class="sphinxsidebarwrapper">
<h3><a href="index.html">Table of Contents</a></h3><ul><li><a href="#">Logging HOWTO</a></li></ul>
<div role="note" aria-label="source link"><h3>This Page</h3><ul class="this-page-menu">
<li><a href="bugs.html">Report a Bug</a></li><li><a href="_sources/howto.rst.txt">Show Source</a></li></ul></div>
<div id="searchbox" role="search"><h3>Quick search</h3><form><input type="text" name="q"/></form></div>
</div></div></div>
<div class="footer">&#169; Copyright 2024, Widgets team. Created using Sphinx.</div></body></html>"""

DOCBOOK_PAGE = """<html><head><title>5.1. Table Basics</title></head><body>
<div class="navheader"><table width="100%"><tr><th colspan="3">5.1. Table Basics</th></tr>
<tr><td><a href="ddl.html">Prev</a></td><th>Chapter 5. Data Definition</th><td><a href="next.html">Next</a></td></tr>
</table><hr/></div>
<div class="sect1"><div class="titlepage"><h2 class="title">5.1. Table Basics</h2></div>
<p>A table in a relational database is much like a table on paper.</p>
<pre class="programlisting">CREATE TABLE products (
    product_no integer,
    name text
);</pre></div>
<div class="navfooter"><hr/><table width="100%"><tr><td><a href="ddl.html">Prev</a></td>
<td><a href="index.html">Home</a></td></tr></table></div></body></html>"""


def test_a_sphinx_page_keeps_its_body_and_drops_navigation_sidebar_footer_and_permalinks(tmp_path):
    path = tmp_path / "howto.html"
    path.write_text(SPHINX_PAGE, encoding="utf-8")
    [doc] = load_file(path)
    text = doc.page_content
    assert doc.metadata["title"] == "Logging HOWTO — Widgets 2.1 documentation"
    for furniture in ("Navigation", "Table of Contents", "This Page", "Report a Bug", "Show Source",
                      "Quick search", "Copyright", "next", "¶"):
        assert furniture not in text, furniture
    assert text.startswith("# Logging HOWTO\n\nWidgets log through the logging module.\n\n## Basic use\n\n```\n")
    assert "```\n# configure once\nimport logging\ndef setup():\n    # a comment, not a heading\n" in text
    assert "Level | Value\nDEBUG | 10\nERROR | 40" in text


def test_code_comments_never_become_sections_and_a_code_block_stays_in_one_chunk(tmp_path):
    path = tmp_path / "howto.html"
    path.write_text(SPHINX_PAGE, encoding="utf-8")
    chunks = TokenChunker(tokenizer=ApproximateTokenizer()).split_documents(load_file(path))
    assert {c.metadata.get("section") for c in chunks} <= {"Logging HOWTO", "Basic use"}
    assert any("import logging\ndef setup():\n    # a comment" in c.page_content for c in chunks)


def test_a_docbook_page_drops_its_navigation_header_and_footer():
    text, title = html_to_text(DOCBOOK_PAGE)
    assert title == "5.1. Table Basics"
    assert text.splitlines()[0] == "## 5.1. Table Basics"
    assert "Prev" not in text and "Home" not in text and "Chapter 5" not in text
    assert "CREATE TABLE products (\n    product_no integer,\n    name text\n);" in text


def test_without_a_marked_main_region_the_whole_page_is_read_less_its_furniture():
    text, _ = html_to_text("<body><nav>Home About</nav><p>Plain page text here.</p><footer>Legal</footer></body>")
    assert text == "Plain page text here."


def test_an_articles_own_header_is_kept_and_the_pages_header_is_not():
    text, _ = html_to_text("<header>Site Logo Menu</header><main><article><header><h1>Post Title</h1>"
                           "<p>By Ann</p></header><p>The post body is here.</p></article></main><footer>Legal</footer>")
    assert text == "# Post Title\n\nBy Ann\nThe post body is here."


_CODE_LINE = st.from_regex(r"[ ]{0,8}(# )?[a-z_]{1,8}( = [0-9]{1,3})?", fullmatch=True)


@settings(max_examples=80, deadline=None)
@given(lines=st.lists(_CODE_LINE, min_size=1, max_size=20), nav=st.lists(st.from_regex(r"[A-Z][a-z]{2,8}",
                                                                                       fullmatch=True), max_size=5))
def test_any_code_block_comes_out_fenced_and_byte_for_byte_and_navigation_never(lines, nav):
    code = "\n".join(lines)
    escaped = code.replace("&", "&amp;").replace("<", "&lt;")
    page = (f"<nav>{' '.join('NAV' + w for w in nav)}</nav><main><h2>Usage</h2><p>Example:</p>"
            f"<pre>{escaped}</pre><p>Done.</p></main><footer>NAVfooter</footer>")
    text, _ = html_to_text(page)
    assert "NAV" not in text
    body = code.strip("\n").rstrip()
    if body.strip():
        assert f"```\n{body}\n```" in text
    sections = TokenChunker(tokenizer=ApproximateTokenizer()).split_documents(
        [Document(page_content=text, metadata={"source": "p.html", "file_type": "html"})])
    assert {c.metadata.get("section") for c in sections} == {"Usage"}
    assert not re.search(r"^#+ (?!Usage)", text.split("```")[0], re.MULTILINE)


def test_a_title_block_named_header_is_content_not_furniture():
    # asciidoc man pages (git's) put the page title and the NAME line in <div id="header">; Doxygen puts the
    # title in <div class="header">: both are what the page is about (the <header> element is still dropped)
    man = ('<div id="header"><h1>git-clean(1) Manual Page</h1><h2>NAME</h2><div class="sectionbody">'
           '<p>git-clean - Remove untracked files from the working tree</p></div></div>'
           '<div id="content"><h2>SYNOPSIS</h2><p>git clean [-d] [-f]</p></div>')
    text, title = html_to_text(man)
    assert title == "git-clean(1) Manual Page"
    assert "git-clean - Remove untracked files from the working tree" in text and "# git-clean(1) Manual Page" in text
    assert "Home" not in html_to_text("<header><a href='/'>Home</a></header><p>Body text of the page here.</p>")[0]


def test_a_table_row_of_one_cell_is_a_block_of_its_own():
    """A reference table of one column (PostgreSQL's function tables): each row is an entry, not a line of prose to
    be joined with the next; rows of several cells stay one line each."""
    page = ("<table><tr><td><p>gcd ( numeric_type, numeric_type ) → numeric_type</p><p>Greatest common divisor.</p>"
            "</td></tr><tr><td>lcm ( numeric_type, numeric_type ) → numeric_type Least common multiple.</td></tr></table>"
            "<table><tr><td>DEBUG</td><td>10</td></tr><tr><td>ERROR</td><td>40</td></tr></table>")
    text, _ = html_to_text(page)
    assert text.split("\n\n") == ["gcd ( numeric_type, numeric_type ) → numeric_type Greatest common divisor.",
                                  "lcm ( numeric_type, numeric_type ) → numeric_type Least common multiple.",
                                  "DEBUG | 10\nERROR | 40"]
