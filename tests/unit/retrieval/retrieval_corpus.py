"""A small real-text corpus shared by the retrieval tests (three filings in consecutive chunks)."""

from __future__ import annotations

from langchain_core.documents import Document

# Three short "filings", each split into consecutive chunks (doc_id / chunk_index like split_documents).
FILINGS = {
    "ACME_2022_10K": ("Acme Corporation annual report 2022", "ACME", 2022, [
        "Acme Corporation designs and manufactures industrial robots for car makers.",
        "In fiscal 2022 Acme's total revenue was $4.2 billion, up 8% from 2021.",
        "Gross margin improved to 41% thanks to lower component costs.",
        "Capital expenditure was $310 million, mostly for the new Ohio plant.",
        "The board declared a quarterly dividend of $0.45 per share.",
    ]),
    "ACME_2023_10K": ("Acme Corporation annual report 2023", "ACME", 2023, [
        "Acme Corporation designs and manufactures industrial robots and welding systems.",
        "In fiscal 2023 Acme's total revenue was $4.9 billion, up 17% from 2022.",
        "Gross margin fell to 38% because steel prices rose sharply.",
        "Capital expenditure was $520 million, including a plant in Mexico.",
        "Acme repurchased 3 million shares during the year.",
    ]),
    "GLOBEX_2023_10K": ("Globex Inc annual report 2023", "GLOBEX", 2023, [
        "Globex Inc operates regional airports and cargo terminals.",
        "Passenger traffic recovered to 96% of pre-pandemic levels in 2023.",
        "Operating income was $780 million on revenue of $3.1 billion.",
        "Globex issued $1 billion of green bonds to fund terminal upgrades.",
        "Litigation over the noise ordinance is described in note 14.",
    ]),
}


def filing_chunks() -> list[Document]:
    docs = []
    for doc_name, (title, company, year, texts) in FILINGS.items():
        for i, text in enumerate(texts):
            docs.append(Document(page_content=text, id=f"{doc_name}-{i}", metadata={
                "doc_id": doc_name, "doc_name": doc_name, "chunk_index": i, "title": title,
                "company": company, "year": year}))
    return docs

