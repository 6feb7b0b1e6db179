"""What the answerer handlers (harness judge, LongMemEval, BEAM) read from a prompt: the
memory section's ``- [labels] text`` lines, and which share a word of four or more
letters with the question. One place, so the three answerers match lines alike."""

from __future__ import annotations

import re

CONTEXT_LINE = re.compile(r"^- (?:\[[^\]]*\] )?(.+)$", re.M)
WORD = re.compile(r"[a-z0-9]{4,}")


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def sharing_lines(system: str, question: str) -> list[tuple[int, str]]:
    """(words shared with the question, the line without its labels) for every memory
    line of the system prompt that shares one, in context order."""
    wanted = words(question)
    out = []
    for line in CONTEXT_LINE.findall(system):
        if shared := len(wanted & words(line)):
            out.append((shared, line.strip()))
    return out


def best_line(system: str, question: str) -> str:
    """The line sharing the most words with the question (the first on a tie), or ""."""
    best, best_shared = "", 0
    for shared, line in sharing_lines(system, question):
        if shared > best_shared:
            best, best_shared = line, shared
    return best
