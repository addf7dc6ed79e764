"""Vector-store access, one module per backend; nothing else calls a store client.

`rag.stores.chroma` (Chroma), `rag.stores.memory` (`ExactVectorStore`, exact and in memory), and the
native filtered search of other engines, chosen by store type in `rag.stores.native`:
`rag.stores.pgvector`, `rag.stores.qdrant`, `rag.stores.milvus`, `rag.stores.lancedb`
(`LanceStore`), `rag.stores.faiss` (`FaissStore`) and `rag.stores.inmemory`. See docs/stores.md.
"""
