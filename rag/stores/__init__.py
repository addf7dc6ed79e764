"""Vector-store access, one module per backend (`rag.stores.chroma`; `rag.stores.memory`, an exact in-memory store);
nothing else calls a store client."""
