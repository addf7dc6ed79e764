"""HTML loading time on hostile and large pages: `load_file` must be linear in the file size.

For each pattern the page is written at 1x, 2x and 4x its base size and loaded with
`rag.indexing.loaders.load_file`; the line shows seconds per size and the growth from 1x to 4x
(about 4 for linear time, 16 for quadratic). Run: `python bench/html_loading.py`.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rag.base.errors import LoaderError
from rag.indexing.loaders import load_file

PATTERNS = {
    "'<' x 200,000": ("<", 200_000),
    "'<a' x 1,000,000": ("<a", 1_000_000),
    "'<!--' x 200,000": ("<!--", 200_000),
    "'<a b=\"' x 100,000": ('<a b="', 100_000),
    "'<div>' x 100,000 (nested)": ("<div>", 100_000),
    "10 MB of paragraphs": ("<p>alpha <b>beta</b> gamma &amp; delta</p>\n", 10_000_000 // 43),
}


def _load_seconds(folder: Path, unit: str, count: int) -> float:
    path = folder / "page.html"
    path.write_text("<title>bench</title>" + unit * count + "<p>end</p>")
    start = time.perf_counter()
    try:
        load_file(path)
    except LoaderError:  # an unclosed comment or tag swallows the text: "no text found" is the right answer
        pass
    return time.perf_counter() - start


def main() -> None:
    print(f"{'pattern':32} {'1x s':>8} {'2x s':>8} {'4x s':>8} {'4x/1x':>6}  size at 1x")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (unit, count) in PATTERNS.items():
            times = [_load_seconds(Path(tmp), unit, count * factor) for factor in (1, 2, 4)]
            size = len(unit) * count
            print(f"{name:32} {times[0]:8.3f} {times[1]:8.3f} {times[2]:8.3f} {times[2] / times[0]:6.1f}  "
                  f"{size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
