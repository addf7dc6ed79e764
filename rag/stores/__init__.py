"""Vector-store access, one module per backend (`rag.stores.chroma`); nothing else calls a store client."""
