"""The leaf layer: errors, the filter dialect, text utilities, result types and the portable-retriever base.

Nothing here imports another `rag` package.
"""
