"""The offline fallback: quotes the context sentences that best answer the question, or says it is not sure.

No model, no key, no network: the answerer of last resort when `RAG_LLM=auto` finds no language model
(`rag.generation.factory`, the only module that imports this package). The context is split into
quotable units (`units`: sentences, and table rows as indexing kept them), scored against the question
(key terms and meaning), and the best are quoted with their `[n]` citations (`answerer`). Below its
confidence threshold it asserts nothing: it says it is not sure and shows the closest passage.

Example:
    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content="The Eiffel Tower is in Paris. It opened in 1889."),
    ...         Document(page_content="Rome has the Colosseum.")]
    >>> answer = ExtractiveAnswerer(embedding=None, min_confidence=0.5).answer("Which city has the Colosseum?", docs)
    >>> str(answer), answer.refused
    ('Rome has the Colosseum. [2]', False)
"""

from rag.generation.extractive.answerer import DEFAULT_MIN_CONFIDENCE, ExtractiveAnswerer, Scored
from rag.generation.extractive.units import Unit, context_units

__all__ = ["DEFAULT_MIN_CONFIDENCE", "ExtractiveAnswerer", "Scored", "Unit", "context_units"]
