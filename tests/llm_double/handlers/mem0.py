"""mem0 2.2.1 ``add(infer=True)``: the additive extraction call.

What mem0 sends (mem0/memory/main.py ``AsyncMemory._add_to_vector_store`` and
mem0/configs/prompts.py): one chat call per add with ``response_format={"type":
"json_object"}``, system = ``ADDITIVE_EXTRACTION_PROMPT`` (starts "# ROLE ... You are a
Memory Extractor"), user = ``generate_additive_extraction_prompt(...)``: sections
"## Summary", "## Last k Messages", "## Recently Extracted Memories", "## Existing
Memories", "## New Messages" (``parse_messages`` output: one ``role: content`` line per
message, content may span lines), "## Observation Date", "## Current Date", optional
"## Custom Instructions", then "# Output:".

What it expects back: ``{"memory": [{"id": "0", "text": "...", "attributed_to": "user",
"linked_memory_ids": []}]}`` (invalid JSON silently yields no memories).

The rule (derived from the request, no expected-answer table): every sentence of the
*user* messages in "## New Messages" becomes one memory, rewritten in the third person
("I live in Oslo" -> "User lives in Oslo", "my" -> "User's"). Assistant messages and
sentences of fewer than two words are skipped.
"""

from __future__ import annotations

import re

from tests.llm_double.server import ChatReply, ChatRequest, json_reply

_SECTION = re.compile(r"^## (.+)$", re.M)
_ROLE_LINE = re.compile(r"^(user|assistant|system): ?(.*)$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# Auxiliaries and modals that keep their form after "User" (or have an irregular one).
_AFTER_I = {
    "am": "is", "'m": "is", "have": "has", "'ve": "has", "was": "was", "do": "does",
    "don't": "doesn't", "did": "did", "didn't": "didn't", "can": "can", "can't": "can't",
    "will": "will", "'ll": "will", "won't": "won't", "would": "would", "'d": "would",
    "should": "should", "could": "could", "might": "might", "must": "must",
    "haven't": "hasn't", "wasn't": "wasn't",
}
_PRONOUNS = {"my": "User's", "mine": "User's", "me": "User", "myself": "User"}
_WORD = re.compile(r"[A-Za-z']+|[^A-Za-z']+")


def is_mem0_extraction(req: ChatRequest) -> bool:
    return (
        req.response_format.get("type") == "json_object"
        and "Memory Extractor" in req.system
        and "## New Messages" in req.user
    )


def sections(prompt: str) -> dict[str, str]:
    """The ``## Name`` sections of mem0's user prompt, by name."""
    found = list(_SECTION.finditer(prompt))
    out = {}
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(prompt)
        body = prompt[match.end():end]
        out[match.group(1).strip()] = body.split("\n# Output:")[0].strip("\n")
    return out


def new_messages(prompt: str) -> list[tuple[str, str]]:
    """(role, content) pairs of the "## New Messages" section (multi-line contents kept)."""
    messages: list[tuple[str, str]] = []
    for line in sections(prompt).get("New Messages", "").splitlines():
        match = _ROLE_LINE.match(line)
        if match:
            messages.append((match.group(1), match.group(2)))
        elif messages:
            role, content = messages[-1]
            messages[-1] = (role, f"{content}\n{line}")
    return messages


def _verb_s(word: str) -> str:
    if word.endswith("ed"):  # past tense stays
        return word
    if word.endswith(("s", "sh", "ch", "x", "z", "o")):
        return word + "es"
    if len(word) > 2 and word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def third_person(sentence: str) -> str:
    """Rewrite a first-person sentence about the user in the third person."""
    tokens = _WORD.findall(sentence)
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        lower = tok.lower()
        if lower in ("i", "i'm", "i've", "i'll", "i'd"):
            out.append("User")
            contraction = lower[1:]
            if contraction:
                out.append(" " + _AFTER_I[contraction])
            elif i + 2 < len(tokens) and tokens[i + 1] == " ":
                nxt = tokens[i + 2]
                verb = _AFTER_I.get(nxt.lower())
                out.append(" ")
                out.append(verb if verb else (_verb_s(nxt) if nxt.islower() else nxt))
                i += 2
        elif lower in _PRONOUNS:
            out.append(_PRONOUNS[lower])
        else:
            out.append(tok)
        i += 1
    text = "".join(out).strip()
    return text if "User" in text else f"User said: {text}"


def extract(req: ChatRequest) -> ChatReply | None:
    if not is_mem0_extraction(req):
        return None
    memories = []
    for role, content in new_messages(req.user):
        if role != "user":
            continue
        for sentence in _SENTENCE.split(" ".join(content.split())):
            if len(sentence.split()) < 2:
                continue
            memories.append({
                "id": str(len(memories)),
                "text": third_person(sentence),
                "attributed_to": "user",
                "linked_memory_ids": [],
            })
    return json_reply({"memory": memories}, "mem0.extract")


HANDLERS = [extract]
