"""What the memory guidance costs nanobot's system prompt build, in one process.

    python benchmarks/bench_skill_cost.py [--rounds 30]

nanobot's ``ContextBuilder.build_system_prompt`` lists its skills several times per
prompt and parses each skill's YAML front matter on every listing, so every skill in the
workspace costs each turn something, and an ``always`` skill's text is in every prompt.
This times the build for four workspaces, in turn, in one process:

- ``none``: no skill, an empty memory slot (nanobot as without the plugin's guidance);
- ``always``: the memory-context skill always on, as the plugin installed it until
  2026-12-02 (the shipped text with ``always: true``), the slot empty;
- ``listed``: the skill listed, read on demand (``nanobot.install_skill: true``; the
  default from 2026-12-02 until the guide became a tool), and the short guidance naming
  it in the memory slot (``skill.guidance``);
- ``tool``: no skill, the guidance naming the ``memory_guide`` tool (the default now; the
  tool's schema travels with the request, not in this prompt).

It prints each median, each arm's difference from ``none`` with a 95 % bootstrap
interval, and the prompt's length in tokens. ``bench_plugin.py --skill-ab`` measures
whole turns with and without the skill.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def _workspace(name: str) -> Path:
    from nanobot_memory_adapters.nanobot.skill import SKILL_TEXT, install_skill, skill_path

    workspace = Path(tempfile.mkdtemp(prefix=f"bench-skill-{name}-"))
    if name == "listed":
        install_skill(workspace)
    elif name == "always":
        path = skill_path(workspace)
        path.parent.mkdir(parents=True)
        path.write_text(SKILL_TEXT.replace("\nalways: false\n", "\nalways: true\n", 1))
    return workspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()

    from nanobot.agent.context import ContextBuilder

    from nanobot_memory_adapters.nanobot.seams import MemoryView
    from nanobot_memory_adapters.nanobot.skill import guidance
    from nanobot_memory_adapters.stats import median_difference
    from nanobot_memory_adapters.tokens import count_tokens

    builders: dict[str, Any] = {}
    for name in ("none", "always", "listed", "tool"):
        builder = ContextBuilder(_workspace(name))
        slot = guidance("skill") if name == "listed" else guidance("tool") if name == "tool" else ""
        builder.memory = MemoryView(builder.memory, lambda slot=slot: slot)
        builder.build_system_prompt()  # warm: imports, templates
        builders[name] = builder
    assert "always: true" in (builders["always"].workspace / "skills" / "memory-context"
                              / "SKILL.md").read_text(), "the always arm lost its switch"
    times: dict[str, list[float]] = {name: [] for name in builders}
    for _ in range(args.rounds):
        for name, builder in builders.items():
            started = time.perf_counter()
            builder.build_system_prompt()
            times[name].append((time.perf_counter() - started) * 1000)
    for name, builder in builders.items():
        p50 = statistics.median(times[name])
        print(f"system prompt build, {name:6}: p50 {p50:6.1f} ms"
              f"  ({count_tokens(builder.build_system_prompt())} tokens)")
    for name in ("always", "listed", "tool"):
        diff = median_difference(times[name], times["none"])
        print(f"{name} - none: {diff.value:+.1f} ms [{diff.low:.1f}, {diff.high:.1f}] p50 per "
              f"build (95 % bootstrap interval, n={diff.n} each)")
    diff = median_difference(times["listed"], times["tool"])
    print(f"listed - tool: {diff.value:+.1f} ms [{diff.low:.1f}, {diff.high:.1f}]")


if __name__ == "__main__":
    main()
