"""The documentation builds with mkdocs --strict (broken links and missing pages fail)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.mark.integration
def test_mkdocs_builds_strict(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    assert mkdocs, "mkdocs is not installed (pip install -e '.[dev]')"
    result = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").exists()


def test_every_docs_page_is_in_the_nav() -> None:
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)["nav"]

    def pages(items):
        for item in items:
            for value in item.values():
                yield from (pages(value) if isinstance(value, list) else [value])

    listed = set(pages(nav))
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk <= listed, f"pages missing from mkdocs.yml nav: {sorted(on_disk - listed)}"


def test_no_install_line_points_at_the_unrelated_pypi_rag() -> None:
    """PyPI's `rag` is another project: docs install from a clone, messages name `rag-runnables`."""
    import re

    install = re.compile(r"pip install\s+(?:-U\s+)?['\"]?rag(?:\[|['\"]|\s|$)", re.MULTILINE)
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "rag").rglob("*.py")]
    offenders = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in files for m in install.finditer(p.read_text())]
    assert not offenders
