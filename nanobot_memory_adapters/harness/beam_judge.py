"""BEAM grading, as BEAM's ``evaluation.py`` grades (our wording of its prompts).

- Every ability: each rubric item (a *nugget*) is judged on its own -- 1.0 satisfied,
  0.5 partly, 0.0 not -- and the question scores their mean. (Upstream casts most
  abilities' item scores with ``int()``, which turns a 0.5 into 0; we keep the 0.5 and
  say so in docs/harness.md.)
- Event ordering, besides the nuggets: the reply's lines are aligned one to one with the
  rubric's events (a yes/no "same event?" judge, first match wins), precision / recall /
  F1 of the aligned events, Kendall's tau-b between the gold order and the reply's
  (unmatched items tied last), normalised to [0, 1]; the ordering score is
  ``tau_norm * F1``.

``verdict.score`` is the nugget mean; the ordering figures travel in ``verdict.raw`` (a
JSON object) so the results can report them apart.
"""

from __future__ import annotations

import json
import re
from typing import Any

from nanobot_memory_adapters.harness.datasets.beam import ability_of
from nanobot_memory_adapters.harness.judge import (
    JudgeSetup,
    LLMAnswerer,
    LLMEndpoint,
    OpenAICompatibleClient,
    Verdict,
)

ANSWER_SYSTEM = (
    "You answer the user's question using only the memory of earlier conversations "
    "below. Be direct and concise.\n\nMemory:\n{context}"
)
NUGGET = (
    "Judge one criterion of a model's reply.\n\nQuestion: {question}\n"
    "Criterion: {item}\nReply: {answer}\n\n"
    "Score 1.0 when the reply answers the question and fully meets the criterion, 0.5 "
    "when it meets it in part, 0.0 otherwise (also when the reply is off-topic). A "
    "criterion that says what the reply should NOT do is met only by an on-topic reply "
    'that avoids it. Reply with JSON only: {{"score": <1.0|0.5|0.0>}}'
)
SAME_EVENT = (
    "Do these two snippets describe the same event or fact? Reply YES or NO only.\n"
    "First snippet: {a}\nSecond snippet: {b}"
)
_SCORE = re.compile(r'"score"\s*:\s*"?([01](?:\.\d+)?)')


def parse_score(raw: str) -> float | None:
    m = _SCORE.search(raw)
    if not m:
        return None
    value = float(m.group(1))
    return value if value in (0.0, 0.5, 1.0) else None


def ordering_score(reference: list[str], system: list[str],
                   same: dict[tuple[int, int], bool]) -> dict[str, float]:
    """BEAM's ordering score from an alignment table ``same[(system_i, reference_j)]``."""
    from scipy.stats import kendalltau

    used: set[int] = set()
    canon: list[str] = []
    for i, s in enumerate(system):
        j = next((j for j in range(len(reference)) if j not in used and same.get((i, j))),
                 None)
        if j is None:
            canon.append(f"\x00{s}")  # unmatched: never equal to a reference item
        else:
            used.add(j)
            canon.append(reference[j])
    tp = len(set(reference) & set(canon))
    fp = sum(1 for x in canon if x not in reference)
    fn = sum(1 for x in reference if x not in canon)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    union = list(dict.fromkeys(reference + canon))
    tie = len(union) + 1

    def ranks(seq: list[str]) -> list[int]:
        r = {x: i + 1 for i, x in enumerate(seq)}
        return [r.get(u, tie) for u in union]

    result: Any = kendalltau(ranks(reference), ranks(canon), variant="b")
    tau = float(result[0])
    tau_norm = (tau + 1) / 2 if tau == tau else 0.0  # NaN (no order): 0
    return {"precision": precision, "recall": recall, "f1": f1, "tau_norm": tau_norm,
            "ordering": tau_norm * f1}


class BeamJudge:
    def __init__(self, client: OpenAICompatibleClient) -> None:
        self.client = client

    async def _ask(self, prompt: str, max_tokens: int = 20) -> str:
        return await self.client.chat([{"role": "user", "content": prompt}],
                                      max_tokens=max_tokens)

    async def judge(self, question: str, gold: str | None, answer: str, *,
                    category: int | None = None) -> Verdict:
        rubric = [str(r) for r in json.loads(gold or "[]")]
        if category is None or not rubric:
            raise ValueError("a BEAM verdict needs the question's ability and rubric")
        scores = [parse_score(await self._ask(NUGGET.format(
            question=question, item=item, answer=answer))) for item in rubric]
        detail: dict[str, Any] = {"nuggets": scores}
        if None in scores:
            return Verdict("unparsed", None, json.dumps(detail))
        detail["nugget_score"] = sum(s for s in scores if s is not None) / len(scores)
        if ability_of(category) == "event_ordering":
            lines = [ln.strip(" -*\t") for ln in answer.splitlines() if ln.strip(" -*\t")]
            same: dict[tuple[int, int], bool] = {}
            for i, line in enumerate(lines):
                for j, ref in enumerate(rubric):
                    reply = await self._ask(SAME_EVENT.format(a=ref, b=line), max_tokens=5)
                    same[(i, j)] = "yes" in reply.lower()
            detail.update(ordering_score(rubric, lines, same))
        score = float(detail["nugget_score"])
        # "correct" only when every nugget is fully met; the score carries partial credit
        return Verdict("correct" if score == 1.0 else "wrong", score, json.dumps(detail))


def beam_judge_setup(endpoint: LLMEndpoint) -> JudgeSetup:
    client = OpenAICompatibleClient(endpoint)
    answerer = LLMAnswerer(client, system=ANSWER_SYSTEM, empty="(nothing remembered)",
                           max_tokens=400)
    return JudgeSetup(answerer=answerer, judge=BeamJudge(client),
                      description={"kind": "openai-compatible", **endpoint.describe(),
                                   "at": "after the last batch",
                                   "rules": "beam nugget grading + event ordering"},
                      closers=[client.aclose])
