"""What the memory-context skill costs nanobot's system prompt build, in one process.

    python benchmarks/bench_skill_cost.py [--rounds 30]

nanobot's ``ContextBuilder.build_system_prompt`` lists its skills several times per
prompt and parses each skill's YAML front matter on every listing, so every skill in the
workspace costs each turn something. This times the build for two workspaces, one
without the skill and one with the plugin's ``skills/memory-context/SKILL.md`` (as
``nanobot.install_skill`` writes it), the two alternating; it prints both medians and
their difference with a 95 % bootstrap interval, and the prompt's length in tokens.
``bench_plugin.py --skill-ab`` measures the same through whole turns.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()

    from nanobot.agent.context import ContextBuilder

    from nanobot_memory_adapters.nanobot.skill import install_skill
    from nanobot_memory_adapters.stats import median_difference
    from nanobot_memory_adapters.tokens import count_tokens

    builders = {}
    for name in ("without", "with"):
        workspace = Path(tempfile.mkdtemp(prefix=f"bench-skill-{name}-"))
        if name == "with":
            install_skill(workspace)
        builders[name] = ContextBuilder(workspace)
        builders[name].build_system_prompt()  # warm: imports, templates
    times: dict[str, list[float]] = {name: [] for name in builders}
    for _ in range(args.rounds):
        for name, builder in builders.items():
            started = time.perf_counter()
            builder.build_system_prompt()
            times[name].append((time.perf_counter() - started) * 1000)
    for name, builder in builders.items():
        p50 = statistics.median(times[name])
        print(f"system prompt build {name:7} the skill: p50 {p50:6.1f} ms"
              f"  ({count_tokens(builder.build_system_prompt())} tokens)")
    diff = median_difference(times["with"], times["without"])
    print(f"the skill adds: {diff.value:+.1f} ms [{diff.low:.1f}, {diff.high:.1f}] p50 per build "
          f"(95 % bootstrap interval, n={diff.n} each)")


if __name__ == "__main__":
    main()
