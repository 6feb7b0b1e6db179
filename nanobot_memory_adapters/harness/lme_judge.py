"""LongMemEval QA grading: an answer model and a yes/no judge with the benchmark's rules.

The rules follow the benchmark's own evaluation (``src/evaluation/evaluate_qa.py``
upstream: one prompt per question type, a yes/no reply, temperature 0); the wording here
is ours. What each type accepts:

- single-session-user / -assistant, multi-session: the reply states the gold answer (or
  all the steps to it); a part of what the gold needs is not enough.
- temporal-reasoning: as above, and an off-by-one in a count of days, weeks or months is
  not penalised.
- knowledge-update: a reply that also mentions older information is right when the
  answer it gives is the updated one.
- single-session-preference: the gold is a rubric; the reply is right when it uses the
  user's own information as the rubric describes (not every point is needed).
- abstention (``question_id`` ends in ``_abs``, any type): right when the reply says the
  question cannot be answered from what it knows.
"""

from __future__ import annotations

import re
from typing import Any

from nanobot_memory_adapters.harness.datasets.longmemeval import type_of
from nanobot_memory_adapters.harness.judge import (
    JudgeSetup,
    LLMAnswerer,
    LLMEndpoint,
    OpenAICompatibleClient,
    Verdict,
)

ANSWER_SYSTEM = (
    "You are a chat assistant with a long-term memory of earlier conversations with this "
    "user. Use the memory below to answer the user's question. Answer briefly. If the "
    "memory does not contain what is needed, say that you do not know.\n\n"
    "Memory:\n{context}"
)
_FACT = (
    "Decide whether a model's reply answers a question correctly.\n\n"
    "Question: {question}\nCorrect answer: {gold}\nModel reply: {answer}\n\n"
    "Say yes when the reply contains the correct answer, says something equivalent, or "
    "gives every step needed to reach it. Say no when it gives only part of what the "
    "correct answer needs, or something else.{extra}\nReply with yes or no only."
)
_TEMPORAL = (" Do not count an off-by-one error in a number of days, weeks, months or "
             "years against the reply (e.g. 19 days where the answer is 18).")
_UPDATE = (" The reply may also mention information that was true earlier: it is correct "
           "as long as the answer it gives is the current (updated) one.")
_PREFERENCE = (
    "Decide whether a model's reply suits the user, judged against a rubric.\n\n"
    "Question: {question}\nRubric (what a personalised reply should do): {gold}\n"
    "Model reply: {answer}\n\n"
    "Say yes when the reply recalls the user's own information and uses it as the rubric "
    "describes; it need not cover every point of the rubric. Otherwise say no.\n"
    "Reply with yes or no only."
)
_ABSTAIN = (
    "The question below cannot be answered from the conversation history; the note says "
    "why.\n\nQuestion: {question}\nNote: {gold}\nModel reply: {answer}\n\n"
    "Say yes when the reply recognises that it cannot answer: it says the information is "
    "missing or incomplete, or that what it knows is about something else. Say no when it "
    "answers as if it knew.\nReply with yes or no only."
)
_YES_NO = re.compile(r"\b(yes|no)\b", re.I)


def judge_prompt(question: str, gold: str | None, answer: str, category: int) -> str:
    """The grading prompt for a question of LongMemEval category ``category``."""
    qtype, abstention = type_of(category)
    fields = {"question": question, "gold": gold or "", "answer": answer}
    if abstention:
        return _ABSTAIN.format(**fields)
    if qtype == "single-session-preference":
        return _PREFERENCE.format(**fields)
    extra = {"temporal-reasoning": _TEMPORAL, "knowledge-update": _UPDATE}.get(qtype, "")
    return _FACT.format(**fields, extra=extra)


def parse_yes_no(raw: str) -> Verdict:
    """The benchmark counts a reply containing "yes" as correct; we take the first yes/no
    word, and call a reply with neither ``unparsed`` (never silently wrong)."""
    m = _YES_NO.search(raw)
    if not m:
        return Verdict("unparsed", None, raw)
    return Verdict("correct", 1.0, raw) if m.group(1).lower() == "yes" \
        else Verdict("wrong", 0.0, raw)


class LmeJudge:
    def __init__(self, client: OpenAICompatibleClient) -> None:
        self.client = client

    async def judge(self, question: str, gold: str | None, answer: str, *,
                    category: int | None = None) -> Verdict:
        if category is None:
            raise ValueError("a LongMemEval verdict needs the question's category")
        prompt = judge_prompt(question, gold, answer, category)
        return parse_yes_no(
            await self.client.chat([{"role": "user", "content": prompt}], max_tokens=10))


def lme_judge_setup(endpoint: LLMEndpoint) -> JudgeSetup:
    client = OpenAICompatibleClient(endpoint)
    description: dict[str, Any] = {
        "kind": "openai-compatible", **endpoint.describe(), "at": "question_date",
        "rules": "longmemeval per-type yes/no grading (docs/harness.md)",
    }
    answerer = LLMAnswerer(client, system=ANSWER_SYSTEM, empty="(nothing remembered)",
                           max_tokens=200)
    return JudgeSetup(answerer=answerer, judge=LmeJudge(client),
                      description=description, closers=[client.aclose])
