"""The ``nanobot-memory`` command: health, conformance, version (+ harness and MemOS rooms)."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.console import (
    NanobotConfigOpt,
    console,
    err_console,
    fail,
    memory_config_source,
)

if TYPE_CHECKING:
    from nanobot_memory_adapters.registry import ProviderSpec

app = typer.Typer(
    name="nanobot-memory",
    help="Replaceable long-term memory for nanobot: check, compare and benchmark providers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _configure_logging(
    log_level: Annotated[
        str, typer.Option("--log-level", envvar="NANOBOT_MEMORY_LOG_LEVEL", help="loguru level")
    ] = "WARNING",
    log_file: Annotated[
        Path | None,
        typer.Option(
            "--log-file", envvar="NANOBOT_MEMORY_LOG_FILE",
            help="Also log everything at DEBUG (the SDKs' own output too) to this file; "
            "bench, demo and preferences run default to <out>/debug.log.",
        ),
    ] = None,
) -> None:
    """Backends (and nanobot) log at DEBUG through loguru; keep the CLI's output readable."""
    from nanobot_memory_adapters.logs import configure_logging

    if log_file is not None:
        log_file = _writable_log_file(log_file)
    try:
        configure_logging(log_level, log_file)
    except ValueError as exc:
        raise fail(f"--log-level: {exc}") from None
    except OSError as exc:
        raise fail(f"--log-file {log_file}: cannot write it ({exc.strerror or exc}); "
                   "give a writable file path") from None


def _writable_log_file(path: Path) -> Path:
    """``--log-file`` expanded, checked now: loguru opens the file at the first message, so
    a folder or an unwritable path would fail mid-command (loguru's multi-line handler
    error) or leave no log at all. Nothing is left behind: no file, no folder."""
    full = path.expanduser()
    fix = "give a file path in a writable folder, e.g. --log-file ./debug.log"
    if full.is_dir():
        raise fail(f"--log-file {path}: is a directory; give a file path, e.g. "
                   f"{path / 'debug.log'}")
    # the nearest folder that exists: loguru creates the missing ones below it
    there = next((p for p in full.parents if p.exists()), None)
    if there is None or not there.is_dir():
        raise fail(f"--log-file {path}: {there} is not a folder, so the file cannot be "
                   f"created there; {fix}")
    try:
        if full.exists():
            with full.open("a", encoding="utf-8"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=there, prefix=".nanobot-memory-log-"):
                pass
    except OSError as exc:
        raise fail(f"--log-file {path}: cannot write it ({exc.strerror or exc}); "
                   f"{fix}") from None
    return full


ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="Memory config JSON (or nanobot-style file with a 'memory' key)."
    ),
]
BackendOpt = Annotated[
    str | None, typer.Option("--backend", help="A backend with its built-in defaults.")
]
ConditionOpt = Annotated[
    str | None, typer.Option("--condition", help="A control condition with its built-in defaults.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Where embedded stores live (default: from config)."),
]


def load(source: dict[str, Any] | Path, data_dir: Path | None, also: Any = None) -> Any:
    from nanobot_memory_adapters.registry import load_provider

    try:
        return load_provider(source, data_dir=data_dir, also=also)
    except ConfigError as exc:
        raise fail(str(exc)) from None


@app.command()
def version() -> None:
    """Print the versions of this package, nanobot and installed backend SDKs."""
    from nanobot_memory_adapters.versions import installed_versions

    for name, ver in installed_versions().items():
        console.print(f"{name} {ver}")


@app.command()
def health(
    config: ConfigOpt = None,
    backend: BackendOpt = None,
    condition: ConditionOpt = None,
    data_dir: DataDirOpt = None,
    as_json: JsonOpt = False,
    nanobot_config: NanobotConfigOpt = None,
) -> None:
    """Build the provider and report its health; exits 1 unless status is ok or degraded."""
    from nanobot_memory_adapters.nanobot_llm import cli_source

    source = cli_source(memory_config_source(config, backend, condition), nanobot_config)
    _check_data_dir(data_dir)

    async def run() -> Any:
        adapter = load(source, data_dir)
        try:
            return await adapter.health()
        finally:
            await adapter.aclose()

    result = asyncio.run(run())
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        table = Table(title=f"health: {result.backend_name}", show_header=False)
        for key, value in result.model_dump().items():
            table.add_row(
                key, json.dumps(value, default=str) if not isinstance(value, str) else value
            )
        console.print(table)
    note = _runs_as_note(source, result.backend_name)
    if note:
        (err_console if as_json else console).print(note, highlight=False, soft_wrap=True)
    if result.status == "unavailable":
        raise typer.Exit(1)


def _check_data_dir(data_dir: Path | None) -> None:
    """``--data-dir`` is a folder, or can be created: checked before the provider is built,
    whose store would fail on it with a raw OS error (and a health of "unavailable")."""
    if data_dir is not None:
        from nanobot_memory_adapters.harness.cli_options import check_out_dir

        check_out_dir(data_dir, "--data-dir")


def _runs_as_note(source: Any, backend_name: str) -> str | None:
    """Why the provider asked for reports another name (mem0 without an llm)."""
    from nanobot_memory_adapters.registry import resolve_config

    try:
        asked = resolve_config(source)[0].provider_name
    except ConfigError:
        return None
    if asked == backend_name:
        return None
    if asked == "mem0" and backend_name == "simple_rag":
        return ("note: mem0 runs as simple_rag: memory.mem0 has no llm configured, so mem0 "
                "runs add(infer=False), the simple_rag control (turns stored verbatim, no "
                'extraction). To extract, set memory.mem0.llm to "nanobot" (nanobot\'s own '
                'model; --nanobot-config PATH, default: config.json beside memory.json) or to '
                '{"base_url": ..., "model": ..., "api_key": ...}')
    return f"note: {asked} runs as {backend_name}"


def _suite_items(text: str | None) -> list[int] | None:
    """``--items 1,3,5`` -> [1, 3, 5]; anything else is one error line listing the items."""
    from nanobot_memory_adapters.testing import ITEMS

    if text is None:
        return None
    valid = {number: name for number, name, _, _ in ITEMS}
    listing = ", ".join(f"{n} ({name})" for n, name in valid.items())
    wanted: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part.isdigit() or int(part) not in valid:
            raise fail(f"--items {text!r}: {part!r} is not a contract item; valid: {listing}")
        if int(part) not in wanted:
            wanted.append(int(part))
    if not wanted:
        raise fail(f"--items is empty; give item numbers such as 1,3 (valid: {listing})")
    return wanted


def _import_provider_class(target: str, spec: ProviderSpec) -> None:
    """Import ``--provider-class``'s module now: a class in development can fail to
    import in any way (a syntax error, an exception its module raises), and each is one
    line naming the option, the module and the exception, not the module's traceback."""
    from nanobot_memory_adapters.registry import provider_class as import_class

    module = target.partition(":")[0]
    try:
        import_class(spec)
    except ConfigError:
        raise
    except ImportError as exc:
        raise fail(f"--provider-class {target}: cannot import it ({exc}); run from "
                   "the folder that holds the module or install its package") from None
    except Exception as exc:  # the user's module ran: any error it raised is theirs
        raise fail(f"--provider-class {target}: importing module {module} raised "
                   f"{type(exc).__name__}: {exc}; fix the module (python -c 'import "
                   f"{module}' shows the traceback)") from None


@app.command()
def conformance(
    config: ConfigOpt = None,
    backend: BackendOpt = None,
    condition: ConditionOpt = None,
    data_dir: DataDirOpt = None,
    items: Annotated[
        str | None, typer.Option(help="Comma-separated item numbers (default: all).")
    ] = None,
    provider_class: Annotated[
        str | None,
        typer.Option("--provider-class", help="A provider class by import path "
                     "(module:Class), registered or not: a class in development, run with "
                     "its default config (importable from the current directory too)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the contract suite (docs/design.md: items 1-13) against a provider; non-zero on failure.

    Without --data-dir, embedded stores live in a temporary directory that is removed
    afterwards, so a conformance run never touches your real memory. The result names the
    conformance level: "full" (every item for what the provider declares passed), "base"
    (the items every provider must pass did, a declared capability's did not) or "none".
    """
    from nanobot_memory_adapters.registry import class_spec, resolve_config
    from nanobot_memory_adapters.testing import SuiteTarget, run_contract_suite

    also = None
    if provider_class:
        if config or backend or condition:
            raise fail("--provider-class runs the class on its default config; give it "
                       "alone (not with --config, --backend or --condition)")
        try:
            also = class_spec(provider_class)
        except ConfigError as exc:
            raise fail(str(exc)) from None
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))  # a class in the project being written
        source: dict[str, Any] | Path = {"backend": also.name}
    else:
        source = memory_config_source(config, backend, condition)
    wanted = _suite_items(items)
    _check_data_dir(data_dir)
    # Fail fast on config errors, before any item runs or any directory is made.
    try:
        memory_config, spec = resolve_config(source, also)
        if also is not None:
            _import_provider_class(provider_class or "", spec)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="nanobot-memory-conformance-")
    base = data_dir or Path(tmp.name)  # type: ignore[union-attr]

    async def make() -> Any:
        return load(source, base, also)

    try:
        no_native, failing_factory = _failing_variant(source, also)
    except ConfigError as exc:
        if tmp is not None:
            tmp.cleanup()
        raise fail(str(exc)) from None

    async def make_failing() -> Any:
        if failing_factory is not None:
            return failing_factory()
        # Embedded stores cannot live under a regular file: a real native failure.
        blocker = base / "conformance-blocked"
        blocker.write_text("this file stands where a directory is expected\n")
        return load(source, blocker / "store", also)

    async def run() -> Any:
        probe = load(source, base, also)
        try:
            state = await probe.health()
        finally:
            await probe.aclose()
        if state.status == "unavailable":
            detail = state.details.get("error", {}).get("message") or state.details
            raise fail(f"{state.backend_name} is unavailable: {detail}", 1)
        target = SuiteTarget(
            make=make,
            make_failing=None if no_native else make_failing,
            no_native_backend=no_native,
            readiness_timeout_s=_readiness_timeout(memory_config, probe),
        )
        with console.status("running contract items...") as status:

            def progress(r: Any) -> None:
                status.update(f"item {r.item}: {r.status}")

            return await run_contract_suite(target, wanted, on_result=progress)

    try:
        report = asyncio.run(run())
    finally:
        if tmp is not None:
            tmp.cleanup()
    if as_json:
        print(
            json.dumps(
                {
                    "provider": report.provider,
                    "ok": report.ok,
                    "level": report.level,
                    "groups": report.groups(),
                    "items": [r.__dict__ for r in report.results],
                },
                indent=2,
                default=str,
            )
        )
    else:
        table = Table(title=f"contract suite: {report.provider}")
        for col in ("group", "item", "check", "result", "detail"):
            table.add_column(col)
        for r in report.results:
            colour = {"passed": "green", "failed": "red"}.get(r.status, "yellow")
            table.add_row(r.group, str(r.item), r.title, Text(r.status, style=colour),
                          r.detail[:120])
        console.print(table)
        console.print(report.summary(), markup=False, highlight=False)
    if not report.ok:
        raise typer.Exit(1)


def _readiness_timeout(config: Any, adapter: Any) -> float:
    """The config's ``readiness_timeout_s`` when set; else the adapter's own minimum or 60 s."""
    if "readiness_timeout_s" in config.model_fields_set:
        return float(config.readiness_timeout_s)
    from nanobot_memory_adapters.provider import readiness_floor_s

    return max(60.0, readiness_floor_s(adapter))


def _failing_variant(source: dict[str, Any] | Path, also: Any = None
                     ) -> tuple[str | None, Any]:
    """How item 7 gets a failing backend: the provider's own recipe, or a blocked store."""
    from nanobot_memory_adapters.provider import failing_variant, no_native_backend
    from nanobot_memory_adapters.registry import provider_class, resolve_config

    config, spec = resolve_config(source, also)
    cls = provider_class(spec)
    no_native = no_native_backend(cls)
    recipe = failing_variant(cls)
    if recipe is None:
        return no_native, None
    from nanobot_memory_adapters.store import as_provider

    block = cls.config_model.model_validate(config.provider_block())
    return no_native, lambda: as_provider(recipe(block))


def _mount_optional_rooms() -> None:
    """Harness, plugin-outbox and MemOS commands live in their own rooms; mount them."""
    try:
        from nanobot_memory_adapters.harness.commands import register as register_harness
    except ImportError:
        pass
    else:
        register_harness(app)
    try:
        from nanobot_memory_adapters.nanobot.outbox_cli import outbox_app
    except ImportError:
        pass
    else:
        app.add_typer(outbox_app, name="outbox",
                      help="The nanobot plugin's outbox: status, requeue failed turns.")
        from nanobot_memory_adapters.nanobot.backfill_cli import backfill
        from nanobot_memory_adapters.nanobot.forget_cli import forget
        from nanobot_memory_adapters.nanobot.scopes_cli import migrate_scopes

        app.command(name="forget")(forget)
        app.command(name="backfill")(backfill)
        app.command(name="migrate-scopes")(migrate_scopes)
        from nanobot_memory_adapters.nanobot.setup_cli import setup
        from nanobot_memory_adapters.nanobot.status_cli import off, on, status

        app.command(name="setup")(setup)
        app.command(name="status")(status)
        app.command(name="off")(off)
        app.command(name="on")(on)
    try:
        from nanobot_memory_adapters.backends.memos.server_cli import memos_app
    except ImportError:
        pass
    else:
        app.add_typer(
            memos_app, name="memos-server", help="Provision and run a local MemOS server."
        )


_mount_optional_rooms()


def main() -> None:  # pragma: no cover
    try:
        app()
    except ConfigError as exc:
        sys.exit(fail(str(exc)).exit_code)  # one line, keys redacted, as every error


if __name__ == "__main__":  # python -m nanobot_memory_adapters.cli
    main()
