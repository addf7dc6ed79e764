"""Syncing sources at 1,000 items: `python bench/sources.py [--items 1000] [--only git,web,...] [--model fake|minilm]`.

For each source (a local folder, a git repository, a web site's sitemap and the same site crawled, an
S3 bucket on moto's server, a LangChain DirectoryLoader), all made here on loopback / in a temporary
folder, it prints one line: the first sync's seconds, a re-sync with nothing changed (seconds, its
share of the first, chunks embedded), one item changed (chunks re-embedded, and the chunks that item
has), and one item deleted (whether its chunks are gone). The site answers conditional GETs (ETag,
Last-Modified, 304) over kept-alive connections; `--only crawl-no-etag` crawls one that sends no
validator (every page fetched and hashed again). The embedding is
`DeterministicFakeEmbedding(384)` by default (`--model minilm`: the real MiniLM, slower first syncs),
so the first sync's time is loading, chunking, AutoContext and writing, and the share a re-sync takes
of it is the conservative figure: a real model makes the first sync longer and the re-sync no longer.

Example:
    python bench/sources.py --items 1000
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests/unit/sources"))   # (the local web site of the tests)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
logging.getLogger("werkzeug").setLevel(logging.ERROR)   # (moto's server logs every request)
warnings.filterwarnings("ignore", category=DeprecationWarning)

WORDS = ("ledger", "invoice", "ticket", "release", "policy", "schema", "cluster", "backup", "audit", "quota")


def text(n: int, version: int = 0) -> str:
    """A document of about 250 words (two chunks), different per item and version."""
    body = " ".join(f"{WORDS[(n * 7 + i + version) % 10]}{(n * 31 + i) % 997}" for i in range(250))
    return f"# Item {n}\n\nItem {n} (version {version}) is about {WORDS[n % 10]}. {body}\n"


class Bench:
    """One source: `make()` writes the items, `source()` builds it, `change(n)` / `delete(n)` edit one item."""

    name = ""

    def __init__(self, root: Path, items: int) -> None:
        self.root, self.items = root, items

    def make(self) -> None: ...
    def source(self): ...
    def change(self, n: int) -> None: ...
    def delete(self, n: int) -> None: ...
    def item_id(self, n: int) -> str: ...
    def close(self) -> None: ...


class FolderBench(Bench):
    name = "folder"

    def make(self) -> None:
        self.dir = self.root / "folder"
        self.dir.mkdir()
        for n in range(self.items):
            (self.dir / f"item{n:05d}.md").write_text(text(n))

    def source(self):
        from rag.indexing.folder_source import FolderSource

        return FolderSource(self.dir)

    def change(self, n: int) -> None:
        (self.dir / f"item{n:05d}.md").write_text(text(n, 1))

    def delete(self, n: int) -> None:
        (self.dir / f"item{n:05d}.md").unlink()

    def item_id(self, n: int) -> str:
        return str((self.dir / f"item{n:05d}.md").resolve())


class GitBench(FolderBench):
    name = "git"
    ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@e.org", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@e.org"}

    def _git(self, *args: str) -> None:
        subprocess.run(["git", "-C", str(self.dir), *args], check=True, capture_output=True, env=self.ENV)

    def make(self) -> None:
        super().make()
        self._git("init", "-q", "-b", "main")
        self._commit()

    def _commit(self) -> None:
        self._git("add", "-A")
        self._git("commit", "-q", "-m", "bench")

    def source(self):
        from rag.sources import GitSource

        return GitSource(self.dir, revision="main")

    def change(self, n: int) -> None:
        super().change(n)
        self._commit()

    def delete(self, n: int) -> None:
        super().delete(n)
        self._commit()

    def item_id(self, n: int) -> str:
        return f"git:{self.dir.resolve()}@main/item{n:05d}.md"


class WebBench(Bench):
    name = "web-sitemap"
    crawl = False
    validators = True   # the server sends ETag and Last-Modified and answers conditional GETs with 304, as a
    #                     static file server (nginx, Apache, a CDN) does; HTTP/1.1 with kept-alive connections

    def make(self) -> None:
        from source_helpers import Site

        self.site, self.lastmod = Site(validators=self.validators, keep_alive=True), {}
        for n in range(self.items):
            self._page(n, 0)
        self._sitemap()

    def _page(self, n: int, version: int) -> None:
        self.site.page(f"/p{n}", f"Item {n}", text(n, version).split("\n", 2)[2],
                       [f"/p{n + 1}"] if n + 1 < self.items else [])
        self.lastmod[n] = f"2025-01-{1 + version:02d}"

    def _sitemap(self) -> None:
        self.site.sitemap("/sitemap.xml", {f"/p{n}": m for n, m in self.lastmod.items()})
        self.site.page("/", "Home", "The start page.", [f"/p{n}" for n in self.lastmod])

    def source(self):
        from rag.sources import WebSource

        url = self.site.base + ("/" if self.crawl else "/sitemap.xml")
        return WebSource(url, allow_private=["127.0.0.1/32"], max_pages=self.items + 1)

    def change(self, n: int) -> None:
        self._page(n, 1)
        self._sitemap()

    def delete(self, n: int) -> None:
        self.site.routes.pop(f"/p{n}")
        self.lastmod.pop(n)
        self._sitemap()

    def item_id(self, n: int) -> str:
        return f"{self.site.base}/p{n}"

    def close(self) -> None:
        self.site.server.shutdown()


class CrawlBench(WebBench):
    name = "web-crawl"
    crawl = True


class PlainCrawlBench(CrawlBench):
    """The crawl of a server that sends no validator: every page fetched and hashed again (kept-alive connections)."""

    name = "crawl-no-etag"
    validators = False


class S3Bench(Bench):
    name = "s3"

    def make(self) -> None:
        import boto3
        from moto.server import ThreadedMotoServer

        for key, value in (("AWS_ACCESS_KEY_ID", "b"), ("AWS_SECRET_ACCESS_KEY", "b"), ("AWS_DEFAULT_REGION", "us-east-1")):
            os.environ[key] = value
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.client = boto3.client("s3", endpoint_url=self.endpoint)
        self.client.create_bucket(Bucket="bench")
        for n in range(self.items):
            self.client.put_object(Bucket="bench", Key=f"docs/item{n:05d}.md", Body=text(n).encode())

    def source(self):
        from rag.sources import ObjectStoreSource

        return ObjectStoreSource("s3://bench/docs", storage_options={"endpoint_url": self.endpoint})

    def change(self, n: int) -> None:
        self.client.put_object(Bucket="bench", Key=f"docs/item{n:05d}.md", Body=text(n, 1).encode())

    def delete(self, n: int) -> None:
        self.client.delete_object(Bucket="bench", Key=f"docs/item{n:05d}.md")

    def item_id(self, n: int) -> str:
        return f"s3://bench/docs/item{n:05d}.md"

    def close(self) -> None:
        self.server.stop()


class LoaderBench(FolderBench):
    name = "langchain"

    def source(self):
        from langchain_community.document_loaders import DirectoryLoader, TextLoader

        from rag.sources import LoaderSource

        return LoaderSource(DirectoryLoader(str(self.dir), glob="*.md", loader_cls=TextLoader), name="bench")

    def item_id(self, n: int) -> str:
        return f"loader:bench:{self.dir / f'item{n:05d}.md'}"


BENCHES = {b.name: b for b in (FolderBench, GitBench, WebBench, CrawlBench, S3Bench, LoaderBench)}
BENCHES[PlainCrawlBench.name] = PlainCrawlBench   # (not in the default run: --only crawl-no-etag)


def run(bench_cls: type[Bench], items: int, model: str) -> dict:
    """The figures of one source (see the module docstring)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.compose.knowledge_base import KnowledgeBase

    root = Path(tempfile.mkdtemp(prefix=f"bench-{bench_cls.name}-"))
    bench = bench_cls(root, items)
    try:
        bench.make()
        embedding = DeterministicFakeEmbedding(size=384) if model == "fake" else None
        kb = KnowledgeBase("bench", root / "store", embedding=embedding)
        first = _timed(kb, bench.source())
        again = _timed(kb, bench.source())
        target = items // 2
        chunks_of = len(kb.get_documents({"source": bench.item_id(target)}))
        bench.change(target)
        changed = _timed(kb, bench.source())
        bench.delete(target + 1)
        deleted = _timed(kb, bench.source())
        gone = kb.get_documents({"source": bench.item_id(target + 1)}) == []
        return {"source": bench.name, "items": items, "first_s": first[0], "first_chunks": first[1].chunks_added,
                "resync_s": again[0], "resync_share": again[0] / first[0], "resync_embedded": again[1].embedded,
                "resync_unchanged": len(again[1].unchanged), "changed_updated": len(changed[1].updated),
                "changed_embedded": changed[1].embedded, "chunks_of_item": chunks_of,
                "deleted": len(deleted[1].deleted), "deleted_chunks_gone": gone}
    finally:
        bench.close()
        shutil.rmtree(root, ignore_errors=True)


def _timed(kb, source):
    started = time.perf_counter()
    try:
        report = kb.sync(source)
    finally:
        source.close()
    return time.perf_counter() - started, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--only", default=",".join(b for b in BENCHES if b != PlainCrawlBench.name),
                        help=f"comma-separated: {', '.join(BENCHES)}")
    parser.add_argument("--model", choices=("fake", "minilm"), default="fake")
    args = parser.parse_args()
    print(f"{'source':12} {'items':>6} {'first s':>8} {'chunks':>7} {'re-sync s':>9} {'share':>7} {'embedded':>8} "
          f"{'1 changed: updated/embedded/its chunks':>40} {'deleted, chunks gone':>21}")
    for name in args.only.split(","):
        r = run(BENCHES[name], args.items, args.model)
        print(f"{r['source']:12} {r['items']:>6} {r['first_s']:>8.2f} {r['first_chunks']:>7} {r['resync_s']:>9.3f} "
              f"{100 * r['resync_share']:>6.2f}% {r['resync_embedded']:>8} "
              f"{r['changed_updated']:>20}/{r['changed_embedded']}/{r['chunks_of_item']:<18} "
              f"{r['deleted']:>8}, {r['deleted_chunks_gone']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
