"""airag / generate: a complete RAGResult, pluggable steps, usage and timings per step."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from rag.base.errors import ConfigError, InputError
from rag.base.result import Candidate, RAGResult
from rag.compose.airag import LLMRefiner, TakeContext, airag, as_rag, generate
from rag.compose.generator import RAG
from rag.generation.extractive import ExtractiveAnswerer
from rag.models.pricing import register_price
from rag.generation.rag_with_source import rag_chain_from_docs

GENERATION_STEPS = ["build_context", "answer", "refine", "postprocess"]


def test_return_all_gives_a_complete_result(city_resource, fake_llm_cls):
    register_price("fake-airag-model", input_per_million=1.0, output_per_million=3.0)
    llm = fake_llm_cls(responses=["The Colosseum is in Rome. [2] It holds 50,000 spectators [5]."],
                       model_name="fake-airag-model")
    result = airag(city_resource, "Where is the Colosseum?", llm=llm, return_all=True, embedding=None)
    assert isinstance(result, RAGResult) and result.question == "Where is the Colosseum?"
    # rag.compose.retrieve records the search per resource and the fused ranking.
    assert len(result.stages["candidates/cities"]) == 3 and len(result.stages["fused"]) == 3
    assert all(c.resource == "cities" for c in result.stages["fused"])
    assert [d.page_content for d in result.context] == [c.document.page_content for c in result.stages["fused"]]
    # the generation chain's answer is already checked: the dangling [5] is removed and reported
    assert result.answer == result.final_answer == "The Colosseum is in Rome. [2] It holds 50,000 spectators."
    assert result.citations["invalid"] == [5] and "invalid_citations" in result.flags
    assert [s["n"] for s in result.sources] == [1, 2, 3]
    assert len(result.support) == 2 and result.citations["precision"] is not None
    assert list(result.timings)[-4:] == GENERATION_STEPS and "search" in result.timings
    assert result.usage["answer"]["output_tokens"] == 11 and result.usage["answer"]["cost"] > 0
    assert result.usage["postprocess"]["calls"] == 0
    assert result.total_usage()["total_tokens"] == result.usage["answer"]["total_tokens"]


def test_the_answer_cites_the_chunk_the_context_numbers(city_resource):
    # a low threshold: the test is about which chunk is cited, not about when the fallback is sure
    result = airag(city_resource, "How many spectators could the Colosseum hold?", llm=ExtractiveAnswerer(min_confidence=0.3),
                   return_all=True, embedding=None)
    n = result.citations["cited"][0]
    assert "50,000 spectators" in result.context[n - 1].page_content
    assert result.citations["sources"][0]["source"] == "city1.txt"
    assert result.support_score == 1.0 and result.flags == []


def test_plain_call_returns_the_final_answer(city_resource):
    answer = airag(city_resource, "Who designed the Sagrada Familia basilica?", llm=ExtractiveAnswerer(min_confidence=0.3),
                   embedding=None)
    assert "Antoni Gaudi designed the basilica." in answer and "[" in answer


def test_search_kwargs_limit_the_context(city_resource):
    result = airag(city_resource, "Rome", llm=ExtractiveAnswerer(), search_kwargs={"k": 1}, return_all=True,
                   embedding=None)
    assert len(result.context) == 1


def test_retrieval_options_go_to_retrieve_and_the_rest_to_generate(city_resource):
    result = airag(city_resource, "Rome", llm=ExtractiveAnswerer(), k=2, max_tokens=None, return_all=True,
                   embedding=None, threshold=0.9)
    assert len(result.context) == 2 and result.extras["settings"]["k"] == 2


def test_unknown_option_lists_the_valid_ones(city_resource):
    with pytest.raises(ConfigError, match=r"unknown airag option\(s\) \['top_n'\]; valid: generation_chain.*rse"):
        airag(city_resource, "Rome", top_n=3)


class _OwnRetrievalRAG(RAG):
    """A RAG with its own retrieval chain (as in the seed's reranked RAG): airag must use it."""

    @property
    def resources_retrieval_chain(self):
        from langchain_core.runnables import RunnableLambda

        return RunnableLambda(lambda q: [Document(page_content="The Colosseum is in Rome.",
                                                  metadata={"resource": "own", "score": 0.5})])


def test_a_rag_with_its_own_retrieval_chain_is_recorded_as_stage_retrieved(city_resource):
    rag = _OwnRetrievalRAG(resources=[city_resource], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    result = airag(rag, "Where is the Colosseum?", return_all=True, embedding=None)
    [candidate] = result.stages["retrieved"]
    assert candidate.score == 0.5 and candidate.scores["lexical"] == 1.0 and candidate.resource == "own"
    assert result.final_answer == "The Colosseum is in Rome. [1]" and "retrieve" in result.timings
    with pytest.raises(ConfigError, match=r"retrieval option\(s\) \['rse'\] set the library pipeline"):
        airag(rag, "Where is the Colosseum?", rse="balanced")


def test_bad_search_kwargs_are_rejected(city_resource):
    with pytest.raises(ConfigError, match="valid: max_chunks, k, filter"):
        airag(city_resource, "Rome", llm=ExtractiveAnswerer(), search_kwargs={"top": 1})


class _Index:
    def __init__(self, resource):
        self.resource = resource

    def as_resource(self):
        return self.resource


def test_accepts_a_rag_a_list_and_anything_with_as_resource(city_resource):
    rag = RAG(resources=[city_resource], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    for source in (rag, [city_resource], _Index(city_resource)):
        assert "Rome" in airag(source, "Where is the Colosseum?", llm=ExtractiveAnswerer(), embedding=None)
    assert as_rag(rag) is rag


def test_rejects_other_inputs_and_empty_questions(city_resource):
    with pytest.raises(InputError, match="takes a RAG, a Resource"):
        airag("not an index", "q")
    with pytest.raises(InputError, match="non-empty"):
        airag(city_resource, "  ")


def _result_with_candidates() -> RAGResult:
    result = RAGResult(question="Where is the Colosseum?")
    result.add_stage("reranked", [Candidate(document=Document(page_content=t), score=s)
                                  for t, s in [("The Colosseum is in Rome.", 0.9), ("Paris is in France.", 0.2)]])
    return result


def test_generate_uses_the_last_stage_and_a_custom_refiner(fake_llm_cls):
    draft = fake_llm_cls(responses=["Rome, and Paris too [2]."])
    refiner = fake_llm_cls(responses=["The Colosseum is in Rome. [1]"], model_name="refiner-model")
    result = generate(_result_with_candidates(), generation_chain=rag_chain_from_docs(draft),
                      refine=LLMRefiner(refiner), embedding=None)
    assert result.answer == "Rome, and Paris too [2]." and result.final_answer == "The Colosseum is in Rome. [1]"
    assert result.usage["refine"]["models"] == ["refiner-model"] and result.usage["answer"]["calls"] == 1
    assert result.support[0]["label"] == "supported" and result.flags == []


def test_generate_steps_are_replaceable(fake_llm_cls):
    def shout(result, config):
        result.final_answer = (result.answer or "").upper()

    result = generate(_result_with_candidates(), generation_chain=rag_chain_from_docs(ExtractiveAnswerer()),
                      build_context=TakeContext(max_chunks=1), postprocess=shout)
    assert len(result.context) == 1 and result.final_answer == "THE COLOSSEUM IS IN ROME. [1]"
    assert result.support == []


def test_take_context_rejects_non_positive_limits():
    with pytest.raises(ValueError, match="max_chunks"):
        TakeContext(max_chunks=0)
