"""How much of nanobot's prompt a llama.cpp server can reuse, per memory placement.

    ../shared/tools/local-llm.sh start 8081
    python benchmarks/bench_prompt_cache.py --llm-url http://127.0.0.1:8081/v1 [--turns 6]
                                            [--provider full_history] [--json out.json]

A real nanobot ``AgentLoop`` (as ``nanobot agent -c`` builds it) with the memory plugin
holds one conversation of ``--turns`` user turns, once per ``context_placement``
(``system_prompt``, ``user_message``), each in a fresh home. Its LLM is a real
OpenAI-compatible server reached through a small recording proxy that reads llama.cpp's
``timings`` of every answer: ``cache_n`` (prompt tokens reused from the server's cache)
and ``prompt_n`` (prompt tokens it had to read). A new memory section in the system
prompt invalidates everything after it (the tool definitions the chat template puts
after the system text, and the whole history); after the user message it invalidates
nothing before it.

Reported per placement and turn (turn 1 is cold for both and shown apart): tokens read,
tokens reused, reuse share, prompt time. Not a timed test; run it by hand (`--json`
keeps the report).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")
# A CPU model reads a cold ~6k-token prompt for longer than nanobot's 90 s stream-idle
# default; nanobot would abort and resend it.
os.environ.setdefault("NANOBOT_STREAM_IDLE_TIMEOUT_S", "1800")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TURNS = [
    "Hi! I just moved to Porto for a new job at a shipping company.",
    "My sister Ana lives in Lisbon and visits every other weekend.",
    "I'm trying to learn to cook, but I only have a tiny two-burner stove.",
    "Can you suggest something easy I could make for Ana on Saturday?",
    "By the way, I can't eat peanuts, I'm allergic.",
    "What should I bring when I visit Ana in Lisbon next month?",
    "Remind me where my sister lives?",
    "What kind of dinner would suit my kitchen?",
]


async def conversation(home: Path, proxy_url: str, provider: str, placement: str,
                       turns: int, proxy: Any) -> list[dict[str, Any]]:
    from nanobot.agent.loop import AgentLoop
    from nanobot.agent.tools.registry import ToolRegistry
    from nanobot.config.loader import load_config

    from nanobot_memory_adapters.nanobot import plugin_for

    workspace = home / "workspace"
    (home / "config.json").write_text(json.dumps({
        "agents": {"defaults": {"workspace": str(workspace), "model": "local",
                                "provider": "custom", "maxTokens": 48,
                                "contextWindowTokens": 200000}},
        "providers": {"custom": {"apiKey": "none", "apiBase": proxy_url}},
    }))
    key = "condition" if provider in ("full_history", "simple_rag") else "backend"
    (home / "memory.json").write_text(json.dumps({
        "memory": {key: provider, "budget": {"max_tokens": 600}},
        "nanobot": {"context_placement": placement},
    }))
    loop = AgentLoop.from_config(load_config(home / "config.json"),
                                 tool_registry=ToolRegistry())
    plugin = plugin_for(loop)
    rows = []
    try:
        for i, text in enumerate(TURNS[:turns]):
            before = len(proxy.timings)
            await loop.process_direct(text, session_key="cli:bench", channel="cli",
                                      chat_id="bench", sender_id="user")
            if plugin is not None:
                await plugin.flush(timeout_s=120)
            seen = proxy.timings[before:]
            rows.append({
                "turn": i + 1,
                "calls": len(seen),
                "prompt_read": sum(int(t.get("prompt_n", 0)) for t in seen),
                "prompt_reused": sum(int(t.get("cache_n", 0)) for t in seen),
                "prompt_ms": round(sum(float(t.get("prompt_ms", 0)) for t in seen), 1),
            })
    finally:
        await loop.aclose()
        if plugin is not None:
            await plugin.aclose()
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    warm = rows[1:]
    read = sum(r["prompt_read"] for r in warm)
    reused = sum(r["prompt_reused"] for r in warm)
    return {
        "turns_after_first": len(warm),
        "prompt_read": read,
        "prompt_reused": reused,
        "reuse_share": round(reused / (read + reused), 3) if read + reused else None,
        "prompt_ms": round(sum(r["prompt_ms"] for r in warm), 1),
        "first_turn": rows[0] if rows else None,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm-url", default=os.environ.get("NANOBOT_MEMORY_TEST_LLM_URL"))
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--provider", default="full_history")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not args.llm_url:
        raise SystemExit("--llm-url (or NANOBOT_MEMORY_TEST_LLM_URL) is required: an "
                         "OpenAI-compatible llama.cpp server, e.g. local-llm.sh start")
    from tests.real_llm.recorder import RecordingProxy

    proxy = RecordingProxy(args.llm_url).start()
    url = proxy.base_url
    out: dict[str, Any] = {"llm": args.llm_url, "provider": args.provider, "turns": args.turns}
    try:
        for placement in ("system_prompt", "user_message"):
            home = Path(tempfile.mkdtemp(prefix=f"bench-cache-{placement}-"))
            try:
                rows = await conversation(home, url, args.provider, placement, args.turns,
                                          proxy)
            finally:
                shutil.rmtree(home, ignore_errors=True)
            out[placement] = {"turns": rows, "summary": summary(rows)}
            print(f"\n{placement}")
            print(f"{'turn':>4} {'calls':>5} {'read':>7} {'reused':>7} {'prompt ms':>10}")
            for r in rows:
                print(f"{r['turn']:>4} {r['calls']:>5} {r['prompt_read']:>7} "
                      f"{r['prompt_reused']:>7} {r['prompt_ms']:>10.0f}")
            s = out[placement]["summary"]
            print(f"turns 2..{args.turns}: read {s['prompt_read']}, reused {s['prompt_reused']}"
                  f" ({s['reuse_share']}), prompt time {s['prompt_ms'] / 1000:.1f} s")
        a, b = out["system_prompt"]["summary"], out["user_message"]["summary"]
        if a["prompt_read"] and b["prompt_read"]:
            out["ratio_tokens_read"] = round(b["prompt_read"] / a["prompt_read"], 3)
            out["ratio_prompt_time"] = round(b["prompt_ms"] / a["prompt_ms"], 3)
            print(f"\nuser_message / system_prompt: tokens read x{out['ratio_tokens_read']}, "
                  f"prompt time x{out['ratio_prompt_time']} (turns 2..{args.turns})")
    finally:
        proxy.stop()
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
