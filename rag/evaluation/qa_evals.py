"""QA evaluation: generate question / answer / source-chunk triples, then score a RAG on them.

`build_qa_evals(documents_or_index, n=...)` picks `n` chunks (seeded) and writes one question per
chunk: with a chat model, the model writes the question and a short answer; offline, the most
informative sentence of the chunk that makes a question a person would ask becomes one, with the
answer taken out of it (`rag.evaluation.qa_questions`: a number, or the subject of "is"); a chunk
with no such sentence is skipped.
Triples are saved as JSONL (`save_qa_evals` / `load_qa_evals`).

`run_qa_evals(rag, evals)` runs `airag` on every question and reports, averaged over questions:
retrieval hit rate, MRR and nDCG at k (`rag.evaluation.metrics`; a retrieved chunk is relevant
when it is the source chunk or contains the item's source sentence, else its reference answer), answer support, citation
precision / recall and, with a `judge` chat model, answer correctness.

Example:
    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content="The Colosseum in Rome could hold about 50,000 spectators.")]
    >>> [(e.question, e.answer) for e in build_qa_evals(docs, n=1)]
    [('The Colosseum in Rome could hold about how many spectators?', '50,000')]
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from pydantic import BaseModel, ConfigDict, Field

from rag.base.errors import ConfigError, InputError
from rag.base.text import split_sentences, tokenize
from rag.compose.airag import airag
from rag.compose.pipeline import chunk_source
from rag.compose.resource import Resource
from rag.evaluation.metrics import hit_rate, mrr, ndcg_at_k
from rag.evaluation.qa_questions import clean_sentence, sentence_question

__all__ = ["QAEval", "QAEvalReport", "build_qa_evals", "chunk_key", "corpus_documents", "load_qa_evals",
           "run_qa_evals", "save_qa_evals"]

_QUESTION_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Write one factual question that the passage answers, and its short answer taken from the "
               "passage. Reply with JSON only: {{\"question\": \"...\", \"answer\": \"...\"}}"),
    ("human", "{passage}"),
])
_JUDGE_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "You grade answers. Reply with one word: yes if the answer agrees with the reference answer, "
               "no otherwise."),
    ("human", "Question: {question}\nReference answer: {reference}\nAnswer: {answer}"),
])


class QAEval(BaseModel):
    """One evaluation item: a question, its reference answer and the chunk it comes from."""

    model_config = ConfigDict(extra="forbid")

    id: str
    question: str
    answer: str
    chunk_id: str
    context: str
    source: str | None = None
    generator: str = "rule"            # "rule" (offline) or "llm"
    metadata: dict[str, Any] = Field(default_factory=dict)


class QAEvalReport(BaseModel):
    """Per-question rows and the averaged metrics of one `run_qa_evals` call."""

    k: int
    metrics: dict[str, float | int | None]
    rows: list[dict[str, Any]]


def _normalise(text: str) -> str:
    return " ".join(text.split()).lower()


def chunk_key(doc: Document | str) -> str:
    """A stable id of a chunk's text (the same chunk has the same key in any store)."""
    text = doc.page_content if isinstance(doc, Document) else doc
    return hashlib.sha1(_normalise(text).encode()).hexdigest()[:16]


def corpus_documents(documents_or_index: Any) -> list[Document]:
    """The chunks of a list of Documents, a `Resource` / `RAG` over vector stores, or an index."""
    if isinstance(documents_or_index, (list, tuple)) and all(isinstance(d, Document) for d in documents_or_index):
        return list(documents_or_index)
    target = documents_or_index
    if callable(getattr(target, "as_resource", None)):
        target = target.as_resource()
    resources = getattr(target, "resources", None) or [target]
    docs: list[Document] = []
    for resource in resources:
        source = chunk_source(resource) if isinstance(resource, Resource) else None
        if source is None:
            raise InputError(f"cannot list the chunks of {type(documents_or_index).__name__}; pass a list of "
                             "Documents, a Resource / RAG whose retrievers can read their chunks back (a "
                             "knowledge base, Chroma, BM25), or an index with .as_resource()")
        docs += [Document(page_content=d.page_content, metadata={**d.metadata, "resource": resource.name}, id=d.id)
                 for d in source.get_documents()]
    return docs


def _rule_item(doc: Document, idf: dict[str, float], min_words: int) -> tuple[str, str, str] | None:
    """`(question, answer, sentence)` from the chunk's most informative sentence that makes a question."""
    def weight(sentence: str) -> float:
        return sum(idf.get(t, 0.0) for t in set(tokenize(sentence, stem=False)))

    made = [(weight(s), s, item) for s in split_sentences(doc.page_content)
            if len(s.split()) >= min_words and not s.lstrip().startswith(("#", "|", "```"))
            for item in [sentence_question(s)] if item is not None]
    if not made:
        return None
    _, sentence, (question, answer) = max(made, key=lambda m: m[0])
    return question, answer, clean_sentence(sentence)


def _llm_item(llm: Any, doc: Document) -> tuple[str, str] | None:
    text = (_QUESTION_PROMPT | llm | StrOutputParser()).invoke({"passage": doc.page_content[:2000]})
    found = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        data = json.loads(found.group()) if found else {}
    except json.JSONDecodeError:
        return None
    question, answer = str(data.get("question", "")).strip(), str(data.get("answer", "")).strip()
    return (question, answer) if question and answer else None


def build_qa_evals(documents_or_index: Any, *, n: int = 20, llm: Any = None, path: str | Path | None = None,
                   seed: int = 0, min_words: int = 6) -> list[QAEval]:
    """Generate up to `n` question / answer / source-chunk triples from a corpus.

    Args:
        documents_or_index: a list of Documents (chunks), a `Resource` or `RAG` over Chroma, or an index.
        n: how many items (fewer when the corpus has fewer usable chunks).
        llm: a chat model that writes the questions; None: the offline sentence rule.
        path: also save the items as JSONL here.
        seed: the chunk sample's random seed.
        min_words: shortest sentence (in words) usable as an offline answer.
    """
    if n < 1:
        raise ConfigError(f"n must be a positive integer, got {n}")
    docs = [d for d in corpus_documents(documents_or_index) if d.page_content.strip()]
    unique = list({chunk_key(d): d for d in docs}.items())
    random.Random(seed).shuffle(unique)
    token_lists = [set(tokenize(d.page_content, stem=False)) for _, d in unique]
    df: dict[str, int] = {}
    for tokens in token_lists:
        for t in tokens:
            df[t] = df.get(t, 0) + 1
    idf = {t: math.log(1 + len(token_lists) / c) for t, c in df.items()}
    evals: list[QAEval] = []
    for key, doc in unique:
        if len(evals) >= n:
            break
        item, generator = (_llm_item(llm, doc), "llm") if llm is not None else (None, "rule")
        if item is None:
            item, generator = _rule_item(doc, idf, min_words), "rule"
        if item is None:
            continue
        md = {k: v for k, v in doc.metadata.items() if isinstance(v, (str, int, float, bool))}
        if len(item) == 3:
            md["sentence"] = item[2]   # what relevance is judged by: the short answer alone is in many chunks
        evals.append(QAEval(id=f"q{len(evals) + 1:03d}", question=item[0], answer=item[1], chunk_id=key,
                            context=doc.page_content, source=md.get("source"), generator=generator, metadata=md))
    if path is not None:
        save_qa_evals(evals, path)
    return evals


def save_qa_evals(evals: Sequence[QAEval], path: str | Path) -> Path:
    """Write one JSON object per line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(e.model_dump_json() + "\n" for e in evals), encoding="utf-8")
    return path


def load_qa_evals(path: str | Path) -> list[QAEval]:
    """Read items written by `save_qa_evals`; a bad line is reported with its number."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(QAEval.model_validate_json(line))
        except ValueError as exc:
            raise InputError(f"{path}:{number} is not a QA eval item: {exc}") from exc
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(sum(kept) / len(kept), 4) if kept else None


def _judge(judge: Any, item: QAEval, answer: str) -> float:
    verdict = (_JUDGE_PROMPT | judge | StrOutputParser()).invoke(
        {"question": item.question, "reference": item.answer, "answer": answer})
    return 1.0 if verdict.strip().lower().startswith("yes") else 0.0


def run_qa_evals(rag: Any, evals: Sequence[QAEval] | str | Path, *, k: int = 5, judge: Any = None,
                 embedding: Any = "default", threshold: float = 0.6) -> QAEvalReport:
    """Answer every question with `airag` and score retrieval, support and citations.

    Args:
        rag: a `RAG`, `Resource`, list of resources or index (anything `airag` takes).
        evals: the items, or the path of a JSONL file of them.
        k: the chunks each answer's context holds (the request's `k`, as `rag ask --k`: at most this many
            chunks from the pipeline) and the cut-off of hit rate / nDCG.
        judge: optional chat model grading answers against the references (answer correctness).
        embedding: embedding model of the support scores (None: lexical only).
        threshold: support score at which a sentence counts as supported.
    """

    items = load_qa_evals(evals) if isinstance(evals, (str, Path)) else list(evals)
    if not items:
        raise InputError("no QA eval items to run; build some with build_qa_evals")
    rows = []
    for item in items:
        start = time.perf_counter()
        result = airag(rag, item.question, return_all=True, config={"configurable": {"k": k}}, embedding=embedding,
                       threshold=threshold)
        seconds = time.perf_counter() - start
        ranked = [c.document for c in list(result.stages.values())[-1]] if result.stages else result.context
        keys = [chunk_key(d) for d in ranked]
        gold = _normalise(str(item.metadata.get("sentence") or item.answer))
        relevant = {item.chunk_id} | {chunk_key(d) for d in ranked if gold and gold in _normalise(d.page_content)}
        rows.append({
            "id": item.id, "question": item.question, "answer": result.final_answer or "",
            "hit": hit_rate(keys, relevant, k=k), "rr": mrr(keys, relevant, k=k), "ndcg": ndcg_at_k(keys, relevant, k=k),
            "support": result.support_score, "citation_precision": result.citations.get("precision"),
            "citation_recall": result.citations.get("recall"), "flags": result.flags,
            "correct": _judge(judge, item, result.final_answer or "") if judge is not None else None,
            "seconds": round(seconds, 3), "cost": result.total_usage()["cost"],
        })
    metrics = {
        f"hit_rate@{k}": _mean([r["hit"] for r in rows]), "mrr": _mean([r["rr"] for r in rows]),
        f"ndcg@{k}": _mean([r["ndcg"] for r in rows]), "answer_support": _mean([r["support"] for r in rows]),
        "citation_precision": _mean([r["citation_precision"] for r in rows]),
        "citation_recall": _mean([r["citation_recall"] for r in rows]),
        "answer_correctness": _mean([r["correct"] for r in rows]),
        "questions": len(rows), "mean_seconds": _mean([r["seconds"] for r in rows]),
    }
    return QAEvalReport(k=k, metrics=metrics, rows=rows)
