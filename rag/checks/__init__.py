"""The checks of an answer: citations resolved, each sentence's support, whether it answers, refusal."""
