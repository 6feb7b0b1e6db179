"""The house rules, checked on the source: the contract at the centre, one room per backend,
the plugin and the harness depending on the contract (and the registry), never on a
backend; the core depending on neither; no import cycle.

Every import counts, wherever it is written (inside a function, under TYPE_CHECKING): a
lazy import hides a cycle from Python, not from the next engineer reading the code."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import networkx as nx

PKG = Path(__file__).resolve().parents[1] / "nanobot_memory_adapters"
ROOT = "nanobot_memory_adapters"
PLUGIN, HARNESS = f"{ROOT}.nanobot", f"{ROOT}.harness"
SEAMS = f"{PLUGIN}.seams"
# The application shell: the one CLI mounts the plugin's terminal commands and the harness.
SHELL = {f"{ROOT}.cli"}
# Known cycles: the list may only shrink (issue 32 emptied it). Each entry is the exact
# set of modules of one strongly connected component.
KNOWN_CYCLES: list[frozenset[str]] = []


def backends() -> list[str]:
    """Every backend is a package under ``backends/``: a new one is checked the day it lands."""
    return sorted(p.parent.name for p in (PKG / "backends").glob("*/__init__.py"))


def _name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_name(p): p for p in PKG.rglob("*.py") if "runtime_scripts" not in p.parts}


@cache
def imports(module: str) -> frozenset[str]:
    """The package's modules ``module`` imports (``from a import b`` names module ``a.b``
    when there is one, else ``a``); relative imports resolved."""
    path, known = modules()[module], modules()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    found.add(full)
                elif base in known:
                    found.add(base)
    return frozenset(found - {module})


def graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for module in modules():
        g.add_node(module)
        g.add_edges_from((module, target) for target in imports(module))
    return g


def _in(module: str, room: str) -> bool:
    return module == room or module.startswith(room + ".")


def test_backends_are_found_on_disk():
    assert {"mem0", "graphiti", "honcho", "memos"} <= set(backends())


def test_no_backend_imports_another_backend():
    for name in backends():
        mine = f"{ROOT}.backends.{name}"
        others = [f"{ROOT}.backends.{o}" for o in backends() if o != name]
        for module in modules():
            if _in(module, mine):
                bad = [m for m in imports(module) if any(_in(m, o) for o in others)]
                assert not bad, f"{module} imports {bad}"


def test_plugin_harness_conditions_and_testing_import_no_backend():
    rooms = [PLUGIN, HARNESS, f"{ROOT}.conditions", f"{ROOT}.testing"]
    for module in modules():
        if any(_in(module, room) for room in rooms):
            bad = [m for m in imports(module) if _in(m, f"{ROOT}.backends")]
            assert not bad, f"{module} imports {bad}"


def test_the_core_imports_neither_the_plugin_nor_the_harness():
    for module in modules():
        if _in(module, PLUGIN) or _in(module, HARNESS) or module in SHELL:
            continue
        bad = [m for m in imports(module) if _in(m, PLUGIN) or _in(m, HARNESS)]
        assert not bad, f"{module} (core) imports {bad}"


def test_the_plugin_does_not_import_the_harness():
    for module in modules():
        if _in(module, PLUGIN):
            bad = [m for m in imports(module) if _in(m, HARNESS)]
            assert not bad, f"{module} imports the harness: {bad}"


def test_the_harness_imports_the_plugin_only_in_its_test_agent():
    for module in modules():
        if _in(module, HARNESS) and module != f"{HARNESS}.preferences.agent":
            # the harness's test agent runs nanobot *with* the plugin (issue 19)
            bad = [m for m in imports(module) if _in(m, PLUGIN)]
            assert not bad, f"{module} imports the plugin: {bad}"


def test_only_the_plugin_imports_the_seams():
    for module in modules():
        if SEAMS in imports(module):
            assert _in(module, PLUGIN), f"{module} imports {SEAMS} (nanobot's private parts)"


def test_every_module_logs_through_the_scrubbing_logger():
    """``logs.logger`` scrubs credentials from every record; a module that imports loguru
    itself logs around it (four did: a raw exception from an ONNX load, mem0's errors)."""
    for module, path in modules().items():
        if module == f"{ROOT}.logs":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        raw = [n.lineno for n in ast.walk(tree)
               if (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "loguru")
               or (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "loguru"
                                                      for a in n.names))]
        assert not raw, f"{module} imports loguru itself (line {raw}); use logs.logger"


def test_the_contract_depends_on_nothing_but_its_own_types():
    allowed = {f"{ROOT}.events", f"{ROOT}.scope", f"{ROOT}.redaction"}
    for name in ("contract", "events", "scope"):
        assert imports(f"{ROOT}.{name}") <= allowed, name


def test_the_import_graph_has_no_cycle_but_the_known_ones():
    cycles = {frozenset(c) for c in nx.strongly_connected_components(graph()) if len(c) > 1}
    new = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert not new, f"import cycles: {new}"
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in cycles]
    assert not gone, f"these known cycles are gone or changed: update KNOWN_CYCLES: {gone}"



# Classes still built from mixins (issue 32 converted the last one, the plugin): none. The
# list may only shrink.
KNOWN_MIXED: set[str] = set()
# A Protocol may extend another Protocol; Generic is a type parameter, not behaviour.
_NOT_BEHAVIOUR = {"Protocol", "Generic"}


def test_no_class_is_built_from_mixins():
    """Composition over mixins: an adapter builds its collaborators (requests, writes,
    readiness, ``base.BulkIngest``...) and calls them, so no class has two parents."""
    mixed = []
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            parents = [ast.unparse(b).split("[")[0].rpartition(".")[2] for b in node.bases]
            if len([p for p in parents if p not in _NOT_BEHAVIOUR]) > 1:
                mixed.append(f"{module}.{node.name}({', '.join(parents)})")
    new = [m for m in mixed if m.split("(")[0] not in KNOWN_MIXED]
    assert not new, f"classes with more than one parent (use a collaborator): {new}"
