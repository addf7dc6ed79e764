from __future__ import annotations

import pytest
from langchain_core.documents import Document
from retrieval_corpus import filing_chunks


@pytest.fixture
def chunks() -> list[Document]:
    return filing_chunks()
