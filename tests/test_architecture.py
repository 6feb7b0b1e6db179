"""The house rules, checked on the source: the contract at the centre, one room per backend,
the plugin and the harness depending on the contract (and the registry), never on a
backend; no module grows into several rooms."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "nanobot_memory_adapters"
BACKENDS = ("mem0", "graphiti", "honcho", "memos")
# Modules over ~500 lines, and why (docs/design.md says the same).
LONG_OK = {
    "harness/preferences/bank.py": "data: the generator's phrase bank",
}
LIMIT = 530


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {m for m in found if m.startswith("nanobot_memory_adapters")}


def _modules(sub: str = "") -> list[Path]:
    root = PKG / sub if sub else PKG
    return [p for p in root.rglob("*.py") if "runtime_scripts" not in p.parts]


def test_no_backend_imports_another_backend():
    for name in BACKENDS:
        others = [f"nanobot_memory_adapters.backends.{o}" for o in BACKENDS if o != name]
        for path in _modules(f"backends/{name}"):
            bad = [m for m in _imports(path) if m.startswith(tuple(others))]
            assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_plugin_harness_and_conditions_import_no_backend():
    for room in ("nanobot", "harness", "conditions", "testing"):
        for path in _modules(room):
            bad = [m for m in _imports(path)
                   if m.startswith("nanobot_memory_adapters.backends")]
            assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_nothing_outside_the_plugin_imports_the_plugin_except_test_agents():
    for path in _modules():
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith("nanobot/") or rel == "harness/preferences/agent.py":
            continue  # the harness's test agent runs nanobot *with* the plugin (issue 19)
        bad = [m for m in _imports(path) if m == "nanobot_memory_adapters.nanobot"
               or m.startswith("nanobot_memory_adapters.nanobot.")]
        if rel == "cli.py":  # the main CLI mounts the plugin's terminal commands, nothing else
            bad = [m for m in bad if m not in (
                "nanobot_memory_adapters.nanobot.outbox_cli",
                "nanobot_memory_adapters.nanobot.forget_cli",
                "nanobot_memory_adapters.nanobot.backfill_cli",
                "nanobot_memory_adapters.nanobot.scopes_cli",
                "nanobot_memory_adapters.nanobot.setup_cli")]
        assert not bad, f"{rel} imports the plugin: {bad}"


def test_the_contract_depends_on_nothing_but_its_own_types():
    allowed = {"nanobot_memory_adapters.events", "nanobot_memory_adapters.scope",
               "nanobot_memory_adapters.redaction"}
    for name in ("contract.py", "events.py", "scope.py"):
        assert _imports(PKG / name) <= allowed, name


def test_no_module_holds_several_rooms():
    for path in _modules():
        rel = path.relative_to(PKG).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if rel not in LONG_OK:
            assert lines <= LIMIT, f"{rel} has {lines} lines (split it, or say why)"
