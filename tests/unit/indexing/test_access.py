"""Document permissions at indexing: rules, the add_documents argument, source metadata; changed in place."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.acl import Permissions, Principal
from rag.base.errors import ConfigError
from rag.base.filters import matches
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.access import AccessRules


class CountingEmbedding(DeterministicFakeEmbedding):
    """Counts the texts it embeds."""

    calls: int = 0

    def embed_documents(self, texts):
        self.calls += len(texts)
        return super().embed_documents(texts)


def _files(root):
    for team in ("team-a", "team-b", "handbook"):
        (root / team).mkdir(parents=True)
        (root / team / f"{team}.md").write_text(f"# {team}\n\nThe {team} plan for revenue and growth.\n")
    return root


def _readers(kb, principal, public_by_default=False):
    flt = principal.filter(public_by_default=public_by_default)
    return sorted({d.metadata["source"].rsplit("/", 1)[-1] for d in kb.get_documents() if matches(d.metadata, flt)})


RULES = {"rules": [{"match": "*/team-a/*", "groups": ["team-a"]}, {"match": "*/team-b/*", "groups": ["team-b"]},
                   {"match": "*/handbook/*", "public": True}]}


def test_rules_give_every_chunk_its_documents_readers(tmp_path):
    corpus = _files(tmp_path / "docs")
    kb = KnowledgeBase("acl", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16), permissions=RULES)
    kb.add_documents(corpus)
    assert _readers(kb, Principal("ann", ["team-a"])) == ["handbook.md", "team-a.md"]
    assert _readers(kb, Principal("bob", ["team-b"])) == ["handbook.md", "team-b.md"]
    assert _readers(kb, Principal("carol")) == ["handbook.md"]   # no groups: only public documents


def test_changing_permissions_updates_metadata_and_embeds_nothing(tmp_path):
    corpus = _files(tmp_path / "docs")
    embedding = CountingEmbedding(size=16)
    kb = KnowledgeBase("acl", tmp_path / "store", embedding=embedding, permissions=RULES, cache=False)
    kb.add_documents(corpus)
    before, ids = embedding.calls, sorted(d.id for d in kb.get_documents())
    assert kb.set_permissions(corpus / "team-a" / "team-a.md", {"groups": ["team-a", "team-b"]}) >= 1
    assert embedding.calls == before and sorted(d.id for d in kb.get_documents()) == ids
    assert _readers(kb, Principal("bob", ["team-b"])) == ["handbook.md", "team-a.md", "team-b.md"]
    # an argument of add_documents reaches an unchanged document the same way: in place
    report = kb.add_documents(corpus / "team-b", permissions={"users": ["bob"]})
    assert report.unchanged and embedding.calls == before
    assert _readers(kb, Principal("ann", ["team-b"])) == ["handbook.md", "team-a.md"]
    assert _readers(kb, Principal("bob")) == ["handbook.md", "team-b.md"]


def test_a_changed_rule_reaches_unchanged_documents_on_the_next_run(tmp_path):
    corpus = _files(tmp_path / "docs")
    embedding = CountingEmbedding(size=16)
    KnowledgeBase("acl", tmp_path / "store", embedding=embedding, permissions=RULES, cache=False).add_documents(corpus)
    before = embedding.calls
    narrowed = {"rules": [{"match": "*/handbook/*", "groups": ["staff"]}, *RULES["rules"][:2]]}
    kb = KnowledgeBase("acl", tmp_path / "store", embedding=embedding, permissions=narrowed, cache=False)
    kb.add_documents(corpus)
    assert embedding.calls == before
    assert _readers(kb, Principal("carol")) == []
    assert _readers(kb, Principal("carol", ["staff"])) == ["handbook.md"]


def test_source_metadata_sets_permissions_and_content_cannot_grant_itself_readers(tmp_path):
    kb = KnowledgeBase("acl", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16))
    docs = [Document(page_content="Payroll for March.", metadata={"source": "hr/payroll", "acl_groups": ["hr"],
                                                                   "acl_users": "ceo"}),
            Document(page_content="Forged.", metadata={"source": "forged", "acl_public": False,
                                                        "acl_g_everyone": True, "acl_u_mallory": True})]
    kb.add_documents(docs)
    by_source = {d.metadata["source"]: d.metadata for d in kb.get_documents()}
    assert matches(by_source["hr/payroll"], Principal("x", ["hr"]).filter())
    assert matches(by_source["hr/payroll"], Principal("ceo").filter())
    assert not matches(by_source["hr/payroll"], Principal("ann", ["team-a"]).filter())
    # `acl_public: False` alone is a source's permissions (nobody); the forged flattened keys are dropped
    assert not any(k.startswith(("acl_g_", "acl_u_")) for k in by_source["forged"])
    assert not matches(by_source["forged"], Principal("mallory", ["everyone"]).filter())


def test_a_knowledge_base_public_by_default_labels_what_no_rule_covers(tmp_path):
    corpus = _files(tmp_path / "docs")
    kb = KnowledgeBase("acl", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16),
                       permissions={"public_by_default": True, "rules": RULES["rules"][:1]})
    kb.add_documents(corpus)
    assert _readers(kb, Principal("carol")) == ["handbook.md", "team-b.md"]


def test_without_rules_nothing_changes_and_unlabeled_chunks_are_hidden(tmp_path):
    corpus = _files(tmp_path / "docs")
    kb = KnowledgeBase("acl", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16))
    kb.add_documents(corpus)
    assert not any(k.startswith("acl_") for d in kb.get_documents() for k in d.metadata)
    assert _readers(kb, Principal("ann", ["team-a"])) == []
    assert _readers(kb, Principal("ann"), public_by_default=True) == ["handbook.md", "team-a.md", "team-b.md"]


@pytest.mark.parametrize("bad", [{"rules": [{"groups": ["a"]}]}, {"rules": [{"match": "*", "grups": ["a"]}]},
                                 {"rulez": []}, ["x"]])
def test_bad_rules_are_config_errors(tmp_path, bad):
    with pytest.raises(ConfigError):
        KnowledgeBase("acl", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16), permissions=bad)


def test_rules_travel_to_other_processes_as_plain_data():
    rules = AccessRules.of(permissions={"groups": ["a"]}, rules=RULES["rules"], public_by_default=True)
    assert AccessRules.from_settings(rules.settings()) == rules
    assert rules.for_document("x", {}) == Permissions(groups=frozenset({"a"}))
