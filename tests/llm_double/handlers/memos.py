"""MemOS 2.0.33 (``MemoryOS``) server prompts, as the real server sends them.

MemOS sends plain chat calls (no ``response_format``), one user message holding the whole
prompt, and parses JSON or tagged text out of the answer. What each call expects:

- Fine extraction (``memos/templates/mem_reader_prompts.py``
  ``SIMPLE_STRUCT_MEM_READER_PROMPT[_ZH]``, strategy variants alike): starts "You are a
  memory extraction expert." / "您是记忆提取专家。", ends with "Conversation:\\n<lines>\\n\\n
  Your Output:" (zh "对话：" ... "您的输出："); lines are ``role: [chat_time]: content``.
  Custom tags, when MemOS passes them (sync fine adds only; async adds drop them), sit in
  "Output tags can refer to the following tags:\\n['a', 'b']". Expects
  ``{"memory list": [{"key", "memory_type": "UserMemory"|"LongTermMemory", "value",
  "tags": [...]}], "summary": "..."}``.
- Task parsing for fine/mixture search (``TASK_PARSE_PROMPT``): "You are a task parsing
  expert" with the question in ``Task description(User Question):\\n\"\"\"...\"\"\"``.
  Expects ``{"keys", "tags", "goal_type", "rephrased_instruction", "internet_search",
  "memories"}``; ``memories`` must be non-empty or fine search silently finds nothing.
- Fine-search refinement: "Transform raw memories into clean, complete, and fully
  disambiguated statements", memories under "## Original Memories" as "- " lines.
  Expects ``<answer>\\n- memory\\n...</answer>`` (anything else is retried ~3 s, then dropped).

- Feedback (``memos/templates/mem_feedback_prompts.py``, ``/product/feedback``):
  ``KEYWORDS_REPLACE`` ('is a "keyword replacement" request') expects
  ``{"if_keyword_replace": "true"|"false", ...}``; ``FEEDBACK_JUDGEMENT_PROMPT`` ("You are a
  answer quality analysis expert", feedback after "User Feedback:") expects a JSON list
  ``[{"validity", "user_attitude", "corrected_info", "key", "tags"}]``;
  ``UPDATE_FORMER_MEMORIES`` (ends "**Newly facts**\n<fact>\n\nOperation
  recommendations:") expects ``{"operations": [{"id", "text", "operation":
  "ADD"|"UPDATE"|"NONE", "old_memory"?}]}``.

Rules (derived from the request, no expected-answer table): every user message of the
conversation becomes one ``UserMemory`` whose value is "The user said: <message>",
tagged with every custom tag MemOS offered (a compliant model); the task parser echoes
the question as its one expansion; refinement keeps each original memory unchanged;
feedback is never a keyword replacement, is always valid with the feedback text as the
corrected info, and is added as a new fact (never an update).
"""

from __future__ import annotations

import ast
import re

from tests.llm_double.server import ChatReply, ChatRequest, json_reply

_EXTRACTION_MARKERS = ("You are a memory extraction expert", "您是记忆提取专家")
_CONVERSATION_START = ("\nConversation:\n", "\n对话：\n")
_CONVERSATION_END = ("Your Output:", "您的输出：")
_LINE = re.compile(r"^(user|assistant|system|tool):\s*(?:\[[^\]]*\]:\s*)?(.*)$")
_TAGS = re.compile(
    r"(?:Output tags can refer to the following tags:|输出tags可以参考下列标签：)\n(\[.*?\])"
)
_TASK = re.compile(r'Task description\(User Question\):\s*"""(.*?)"""', re.S)
_ORIGINAL = re.compile(r"## Original Memories\n(.*?)\n\s*Final Output:", re.S)


def _prompt(req: ChatRequest) -> str:
    return req.all_text


def conversation(prompt: str) -> list[tuple[str, str]]:
    """(role, content) of the prompt's final conversation block (multi-line kept)."""
    # The prompt's examples also contain "Conversation:" blocks: the real one is the last.
    start = max(prompt.rfind(marker) for marker in _CONVERSATION_START)
    if start < 0:
        return []
    block = prompt[start:].split("\n", 2)[2]
    for end in _CONVERSATION_END:
        cut = block.rfind(end)
        if cut >= 0:
            block = block[:cut]
    out: list[tuple[str, str]] = []
    for line in block.splitlines():
        role_line = _LINE.match(line)
        if role_line:
            out.append((role_line.group(1), role_line.group(2)))
        elif out and line.strip():
            role, content = out[-1]
            out[-1] = (role, f"{content} {line.strip()}")
    return out


def offered_tags(prompt: str) -> list[str]:
    match = _TAGS.search(prompt)
    if not match:
        return []
    try:
        tags = ast.literal_eval(match.group(1))
    except (ValueError, SyntaxError):
        return []
    return [str(t) for t in tags if t] if isinstance(tags, list) else []


def extract(req: ChatRequest) -> ChatReply | None:
    prompt = _prompt(req)
    if not any(marker in prompt for marker in _EXTRACTION_MARKERS):
        return None
    tags = offered_tags(prompt)
    memories = []
    for role, content in conversation(prompt):
        text = " ".join(content.split())
        if role != "user" or len(text.split()) < 2:
            continue
        memories.append(
            {
                "key": " ".join(text.split()[:6]),
                "memory_type": "UserMemory",
                "value": f"The user said: {text}",
                "tags": tags,
            }
        )
    summary = " ".join(m["value"] for m in memories)
    return json_reply({"memory list": memories, "summary": summary}, "memos.extract")


def parse_task(req: ChatRequest) -> ChatReply | None:
    prompt = _prompt(req)
    if "You are a task parsing expert" not in prompt:
        return None
    match = _TASK.search(prompt)
    task = " ".join(match.group(1).split()) if match else req.last_user.strip()
    return json_reply(
        {
            "keys": [],
            "tags": [],
            "goal_type": "retrieval",
            "rephrased_instruction": "",
            "internet_search": False,
            "memories": [task or "memory"],
        },
        "memos.parse_task",
    )


def refine(req: ChatRequest) -> ChatReply | None:
    prompt = _prompt(req)
    if "Transform raw memories into clean" not in prompt:
        return None
    match = _ORIGINAL.search(prompt)
    body = match.group(1) if match else ""
    items: list[str] = []
    for line in body.splitlines():
        if line.startswith("- "):
            items.append(line[2:].strip())
        elif items and line.strip():
            items[-1] += " " + line.strip()
    answer = "\n".join(f"- {i}" for i in items if i)
    return ChatReply(content=f"<answer>\n{answer}\n</answer>", handler="memos.refine")




def keyword_replace(req: ChatRequest) -> ChatReply | None:
    if 'is a "keyword replacement" request' not in _prompt(req):
        return None
    return json_reply(
        {"if_keyword_replace": "false", "doc_scope": None, "original": None, "target": None},
        "memos.keyword_replace",
    )


def judge_feedback(req: ChatRequest) -> ChatReply | None:
    prompt = _prompt(req)
    if "You are a answer quality analysis expert" not in prompt:
        return None
    # the prompt's examples have their own "User Feedback:" blocks: the real one is last
    start = prompt.rfind("User Feedback:\n")
    tail = prompt[start + len("User Feedback:\n"):] if start >= 0 else ""
    feedback = " ".join(tail.rsplit("Output:", 1)[0].split())
    if not feedback:
        return json_reply([], "memos.judge_feedback")
    return json_reply([{
        "validity": "true",
        "user_attitude": "dissatisfied",
        "corrected_info": f"The user said: {feedback}",
        "key": " ".join(feedback.split()[:6]),
        "tags": [],
    }], "memos.judge_feedback")


def update_memories(req: ChatRequest) -> ChatReply | None:
    prompt = _prompt(req)
    start = prompt.rfind("**Newly facts**\n")
    if start < 0 or not prompt.rstrip().endswith("Operation recommendations:"):
        return None
    tail = prompt[start + len("**Newly facts**\n"):]
    fact = " ".join(tail.rsplit("Operation recommendations:", 1)[0].split())
    return json_reply(
        {"operations": [{"id": "0001", "text": fact, "operation": "ADD"}]},
        "memos.update_memories",
    )


HANDLERS = [extract, parse_task, refine, keyword_replace, judge_feedback, update_memories]
