"""An annual report as PDF text extraction gives it: pages of prose and financial tables, headings on their own lines.

Written for these tests (the company and figures are invented); shaped like the FinanceBench
filings: a running header on every page, MD&A prose, the primary statements as number tables
whose text says little beyond their line items, and notes.
"""

from __future__ import annotations

from langchain_core.documents import Document

HEADER = "Northwind Traders, Inc."

PAGES = [
    """Northwind Traders, Inc.
Item 1. Business
Northwind Traders distributes specialty foods to restaurants and grocery chains in North America.
We operate 42 distribution centres and a fleet of 1,900 refrigerated trucks.
Our customers order through our website, our mobile app and our sales representatives.""",
    """Northwind Traders, Inc.
Item 1A. Risk Factors
Food safety incidents could harm our reputation and lead to recalls and litigation.
Rising fuel prices increase the cost of our deliveries and may reduce our margins.
A cyber attack on our ordering systems could interrupt sales for several days.""",
    """Northwind Traders, Inc.
Results of Operations
Net sales grew 9% in fiscal 2023 to $6.1 billion, driven by price increases and new restaurant customers.
Gross margin narrowed by 40 basis points as produce and dairy costs rose faster than our prices.
Selling, general and administrative expenses rose 6%, mainly from wages at our distribution centres.""",
    """Northwind Traders, Inc.
Liquidity and Capital Resources
Cash provided by operating activities was $412 million, compared with $355 million a year earlier.
We spent $188 million on new trucks and on the expansion of our Denver and Atlanta centres.
Our revolving credit facility of $800 million was undrawn at year end.""",
    """Northwind Traders, Inc.
Consolidated Statements of Operations
(in millions, except per share data)
Fiscal 2023 2022 2021
Net sales 6,104 5,600 5,012
Cost of sales 4,821 4,401 3,930
Gross profit 1,283 1,199 1,082
Operating income 402 377 331
Net income 281 262 229""",
    """Northwind Traders, Inc.
Consolidated Balance Sheets
(in millions)
2023 2022
Cash and cash equivalents 310 254
Accounts receivable, net 588 541
Inventories 702 655
Total current assets 1,655 1,498
Property and equipment, net 1,204 1,101
Total assets 3,516 3,262
Accounts payable 611 570
Total current liabilities 902 861""",
    """Northwind Traders, Inc.
Consolidated Statements of Cash Flows
(in millions)
2023 2022 2021
Net income 281 262 229
Depreciation and amortization 133 121 110
Purchases of property and equipment (188) (164) (140)
Net cash provided by operating activities 412 355 318""",
    """Northwind Traders, Inc.
Note 4. Inventories
Inventories are stated at the lower of cost and net realisable value, cost on a first-in, first-out basis.
Most of our inventory is perishable and turns over in less than three weeks.""",
    """Northwind Traders, Inc.
Note 7. Acquisitions
In March 2023 we acquired Harbor Seafood Supply for $96 million in cash.
In October 2022 we acquired the Prairie Bakery group to enter the bread wholesale market.""",
    """Northwind Traders, Inc.
Note 9. Income Taxes
Our effective tax rate was 24.1% in fiscal 2023, compared with 23.6% in fiscal 2022.
The increase reflects higher state taxes in the regions where our sales grew most.""",
    """Northwind Traders, Inc.
Note 11. Leases
We lease most of our distribution centres under operating leases of ten to twenty years.
Operating lease cost was $74 million in fiscal 2023.""",
    """Northwind Traders, Inc.
Note 12. Debt
Our senior notes of $500 million bear interest at 4.25% and are due in 2029.
We were in compliance with every covenant of our credit agreements at year end.""",
]


def report_chunks(*, sections: bool = False, doc_id: str = "NORTHWIND_2023_10K") -> list[Document]:
    """One chunk per paragraph line group of every page (about 3 lines each), in document order.

    With `sections=True` each chunk also carries the `section` metadata a structure-aware chunker
    would set (the page heading); by default the router has to find the headings in the text.
    """
    chunks: list[Document] = []
    for page, text in enumerate(PAGES):
        lines = text.splitlines()
        heading = lines[1]
        groups = [lines[i:i + 3] for i in range(0, len(lines), 3)]
        for group in groups:
            meta = {"doc_id": doc_id, "page": page, "chunk_index": len(chunks), "title": "Northwind annual report 2023"}
            if sections:
                meta["section"] = heading
            chunks.append(Document(page_content="\n".join(group), id=f"{doc_id}-{len(chunks)}", metadata=meta))
    return chunks
