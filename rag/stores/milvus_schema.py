"""The layout of a Milvus collection rag creates for a knowledge base: langchain-milvus' fields and Milvus' BM25.

`create_collection` makes the fields `langchain_milvus.Milvus` writes and reads (a string primary
key ``pk``, the text, the float vector, the metadata as one JSON field: the layout
`rag.stores.milvus.translate` filters on), and beside them the fields of Milvus' own full-text
search: `TOKENS`, a VARCHAR holding the chunk's tokens (title, section and text tokenised by
`rag.base.text.tokenize`, the tokens every lexical index of rag uses), analysed by Milvus, and
`SPARSE`, the sparse vector Milvus' BM25 function derives from it, under a BM25 index with rag's
parameters (`rag.stores.in_store_lexical.K1`, `B`). The tokens are written in the same insert as
the vector (`rag.stores.milvus.MilvusChunks`), so a chunk and its tokens never part; the search is
`rag.stores.milvus_lexical`.

**rag's tokens through Milvus' analyzer.** Milvus Lite's analyzers are ``standard`` (lower-case
``\\w+`` runs) and ``jieba`` only; a Milvus server's ``standard`` splits on spaces and punctuation
and lower-cases. So each token is written in a form every such analyzer keeps as one term: a token
of at most `PLAIN_MAX` ASCII letters and digits as it is (most tokens), any other (accents,
"1,234.5", very long words) as 32 base-32 characters of its BLAKE2b hash, a length no plain token
has, so the two forms never meet. A query's tokens are written the same way
(`query_text`). The analyzer then counts exactly rag's tokens, and BM25's term frequencies and
lengths are rag's.

**An engine without BM25.** The collection is made with the BM25 function first; an engine that
refuses it (a Milvus server before 2.5, an analyzer it lacks) answers with an error, which is
logged, and the collection is left to langchain-milvus to create at the first write, without it:
its knowledge base then keeps an SQLite FTS5 index beside its records
(`rag.stores.lexical_chunks.lexical_beside`), as a collection made elsewhere or by an earlier
version does.

Example:
    >>> query_text("Revenue growth: revenue 1,234.5")
    'revenu growth jnow36qwnbfqtgxtjbn63mitttlofzk7'
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from collections.abc import Sequence
from typing import Any

from rag.base.text import tokenize
from rag.stores.in_store_lexical import B, K1, chunk_tokens

__all__ = ["ANALYZER", "PLAIN_MAX", "SPARSE", "TOKENS", "create_collection", "has_lexical_field", "query_text",
           "row_tokens", "term"]

logger = logging.getLogger(__name__)

#: the VARCHAR field holding each chunk's tokens, analysed by Milvus
TOKENS = "rag_tokens"
#: the sparse vector Milvus' BM25 function writes from `TOKENS`
SPARSE = "rag_bm25"
_FUNCTION = "rag_bm25_function"
#: the analyzer of `TOKENS` (every Milvus has it; the tokens are written so it keeps each one whole)
ANALYZER = {"tokenizer": "standard"}
#: the longest token written as it is (a hashed token is 32 characters; analyzers may drop tokens of 40 bytes)
PLAIN_MAX = 31
_PLAIN = re.compile(rf"[a-z0-9]{{1,{PLAIN_MAX}}}")
#: the most bytes a VARCHAR holds
_MAX_BYTES = 65_535


def term(token: str) -> str:
    """How a token is written in `TOKENS`: itself when plain, else 32 base-32 characters of its hash."""
    if _PLAIN.fullmatch(token):
        return token
    digest = hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=20).digest()
    return base64.b32encode(digest).decode("ascii").lower()


def row_tokens(text: str, metadata: dict[str, Any] | None = None) -> str:
    """A chunk's `TOKENS` value: its tokens (title and section first) as terms, space-separated, cut at a token
    boundary to fit a VARCHAR (a chunk of tens of thousands of tokens keeps its first 65,535 bytes' worth)."""
    out = " ".join(term(t) for t in chunk_tokens(text, metadata))
    if len(out) > _MAX_BYTES:   # (terms are ASCII: characters are bytes)
        out = out[:out.rfind(" ", 0, _MAX_BYTES + 1)]
    return out


def query_text(query: str) -> str:
    """A question as Milvus' BM25 search takes it: its distinct tokens, as terms."""
    return " ".join(dict.fromkeys(term(t) for t in tokenize(query)))


def has_lexical_field(store: Any) -> bool:
    """Whether the collection of the `langchain_milvus.Milvus` `store` exists with `TOKENS` and the BM25 function
    writing `SPARSE` (a collection rag created); False for one made elsewhere, by an earlier version, or not yet."""
    if not store.client.has_collection(store.collection_name):
        return False
    info = store.client.describe_collection(store.collection_name)
    fields = {f["name"] for f in info.get("fields", [])}
    functions = [f for f in info.get("functions", []) if SPARSE in (f.get("output_field_names") or [])]
    return TOKENS in fields and bool(functions)


def create_collection(client: Any, name: str, dimension: int, *, consistency_level: str = "Session") -> bool:
    """Create the collection `name` for vectors of `dimension`, with Milvus' BM25 (see the module docstring);
    whether it was made. An engine that refuses the BM25 function gets nothing: the error is logged, and
    langchain-milvus creates the collection, without it, at the first write."""
    from pymilvus import MilvusException

    schema, indexes = _schema(client, dimension)
    try:
        client.create_collection(name, schema=schema, index_params=indexes, consistency_level=consistency_level)
    except MilvusException as exc:
        logger.warning("milvus: collection %r made without Milvus' BM25 full-text search, which this engine "
                       "refused (%s): its knowledge base keeps an SQLite FTS5 index beside its records", name, exc)
        if client.has_collection(name):   # (made, then its BM25 index refused)
            client.drop_collection(name)
        return False
    return True


def _schema(client: Any, dimension: int) -> tuple[Any, Any]:
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("text", DataType.VARCHAR, max_length=_MAX_BYTES)   # (langchain-milvus' fields and sizes)
    schema.add_field("pk", DataType.VARCHAR, is_primary=True, auto_id=False, max_length=_MAX_BYTES)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
    schema.add_field("metadata", DataType.JSON)
    schema.add_field(TOKENS, DataType.VARCHAR, max_length=_MAX_BYTES, enable_analyzer=True,
                     analyzer_params=dict(ANALYZER))
    schema.add_field(SPARSE, DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(Function(name=_FUNCTION, function_type=FunctionType.BM25, input_field_names=[TOKENS],
                                 output_field_names=[SPARSE]))
    indexes = client.prepare_index_params()
    indexes.add_index("vector", index_type="FLAT", metric_type="COSINE")
    bm25 = {"bm25_k1": K1, "bm25_b": B}   # (pymilvus 3 sends them as keys of their own, which a server reads;
    indexes.add_index(SPARSE, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",   # Milvus Lite reads the
                      params={**bm25, "params": bm25})                                  # older "params" only)
    return schema, indexes

