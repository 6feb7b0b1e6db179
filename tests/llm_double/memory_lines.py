"""What the answerer handlers (harness judge, LongMemEval, BEAM) read from a prompt: the
memory section's item lines (``[when] Who: text``, ``- text``) and any other ``- `` line
(a native memory file), and which share a word of four or more letters with the question.
One place, so the three answerers match lines alike."""

from __future__ import annotations

import re

from nanobot_memory_adapters.formatting import SECTION_TAG, opens_item

LABEL = re.compile(r"^(?:- )?(?:\[[^\]]*\] )?")
OPEN, CLOSE = f"<{SECTION_TAG}", f"</{SECTION_TAG}>"
WORD = re.compile(r"[a-z0-9]{4,}")


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def memory_lines(system: str) -> list[str]:
    """Every memory line of a prompt without its label, in order: item lines inside a
    ``<memory-context>`` section (``formatting.opens_item``), ``- `` lines elsewhere."""
    out, inside = [], False
    for line in system.splitlines():
        if line.startswith(OPEN):
            inside = True
        elif line.startswith(CLOSE):
            inside = False
        elif (line.startswith("- ") or (inside and opens_item(line))) and (
                text := LABEL.sub("", line, count=1)):
            out.append(text)
    return out


def sharing_lines(system: str, question: str) -> list[tuple[int, str]]:
    """(words shared with the question, the line without its labels) for every memory
    line of the system prompt that shares one, in context order."""
    wanted = words(question)
    out = []
    for line in memory_lines(system):
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
