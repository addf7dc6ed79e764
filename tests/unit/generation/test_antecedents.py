"""A unit that refers back ("This adapter ...") is quoted with the sentence naming what the question asks for."""

from __future__ import annotations

from langchain_core.documents import Document

from rag.generation.extractive import ExtractiveAnswerer
from rag.generation.question_types import identifiers_in

# the Requests user guide (advanced.html, "Transport Adapters") as the HTML loader prints it
ADAPTERS = ("Transport Adapters provide a mechanism to define interaction methods for an HTTP service. In particular, "
            "they allow you to apply per-service configuration.\n\nRequests ships with a single Transport Adapter, the "
            "HTTPAdapter. This adapter provides the default Requests interaction\nwith HTTP and HTTPS using the "
            "powerful urllib3 library. Whenever a Requests Session is initialized, one of these is\nattached to the "
            "Session object for HTTP, and one for HTTPS.")


def test_an_acronym_led_class_name_is_an_identifier_and_a_plural_acronym_is_not():
    assert identifiers_in("the HTTPAdapter and a JSONDecodeError") == {"httpadapter", "jsondecodeerror"}
    assert identifiers_in("URLs and APIs over HTTPS") == set()


def test_a_sentence_referring_back_is_quoted_with_the_sentence_naming_the_answer():
    answer = ExtractiveAnswerer().invoke({"question": "Which transport adapter does Requests provide for HTTP and HTTPS?",
                                          "context": [Document(page_content=ADAPTERS, metadata={"title": "Advanced Usage"})]})
    assert answer.startswith("Requests ships with a single Transport Adapter, the HTTPAdapter. This adapter provides")


def test_a_sentence_naming_the_answer_itself_is_quoted_alone():
    answer = ExtractiveAnswerer().invoke({"question": "Which adapter uses the urllib3 library?",
                                          "context": [Document(page_content="The HTTPAdapter uses the urllib3 library. "
                                                                            "It is attached to every Session.")]})
    assert answer == "The HTTPAdapter uses the urllib3 library. [1]"
