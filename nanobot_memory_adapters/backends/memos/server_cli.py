"""``nanobot-memory memos-server start | status | stop``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from nanobot_memory_adapters.backends.memos.launcher import (
    DEFAULT_LLM_MODEL,
    DEFAULT_PORT,
    MemosServerError,
    MemosServerSettings,
    default_home,
)
from nanobot_memory_adapters.backends.memos.server import (
    server_status,
    start_server,
    stop_server,
)
from nanobot_memory_adapters.backends.memos.services import provision
from nanobot_memory_adapters.console import fail
from nanobot_memory_adapters.logs import logger

memos_app = typer.Typer(
    name="memos-server",
    help="Provision and run a local MemOS server (own venv, Postgres+pgvector, optional Redis).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


# --------------------------------------------------------------------------- CLI


def checked_home(home: Path | None, *, existing: bool = False) -> Path | None:
    """``--home`` as a folder: a file there is one error line (not a traceback from the
    lock); ``existing``: a home given for ``stop``/``status`` must be there (a typo must
    not create a folder and report an empty home)."""
    if home is None:
        return None
    if home.exists() and not home.is_dir():
        raise fail(f"--home {home}: a file, not a folder; give MemOS's data folder")
    if existing and not home.exists():
        raise fail(f"--home {home}: no such folder; give the --home the server was "
                   "started with")
    return home


HomeOpt = Annotated[
    Path | None,
    typer.Option(
        "--home", help="Data dir (default: $NANOBOT_MEMORY_HOME/memos or ./.nanobot-memory/memos)."
    ),
]


@memos_app.command()
def start(
    home: HomeOpt = None,
    port: Annotated[int, typer.Option(help="127.0.0.1 port (0 = any free port).", min=0,
                                      max=65535)] = DEFAULT_PORT,
    llm_base_url: Annotated[
        str | None,
        typer.Option(
            envvar="NANOBOT_MEMORY_MEMOS_LLM_BASE_URL", help="OpenAI-compatible base URL (…/v1)."
        ),
    ] = None,
    llm_api_key: Annotated[
        str | None,
        typer.Option(
            envvar="NANOBOT_MEMORY_MEMOS_LLM_API_KEY", help="API key for the LLM endpoint."
        ),
    ] = None,
    llm_model: Annotated[
        str, typer.Option(envvar="NANOBOT_MEMORY_MEMOS_LLM_MODEL")
    ] = DEFAULT_LLM_MODEL,
    embed_base_url: Annotated[
        str | None,
        typer.Option(
            help="OpenAI-compatible embeddings endpoint (default: local MiniLM in MemOS's venv)."
        ),
    ] = None,
    embed_api_key: Annotated[
        str | None, typer.Option(envvar="NANOBOT_MEMORY_MEMOS_EMBED_API_KEY")
    ] = None,
    embed_model: Annotated[str | None, typer.Option()] = None,
    embed_dims: Annotated[
        int | None, typer.Option(help="Embedding dimension of --embed-model.", min=1)
    ] = None,
    redis: Annotated[
        bool | None,
        typer.Option(
            "--redis/--no-redis",
            help="Scheduler queue on Debian redis-server (default: if installed).",
        ),
    ] = None,
    patch_postgres_filter: Annotated[
        bool,
        typer.Option(
            help="Apply search filters in postgres vector search (MemOS 2.0.33 drops them)."
        ),
    ] = True,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for /health.", min=1)] = 300.0,
    provision_only: Annotated[bool, typer.Option(help="Only build MemOS's venv.")] = False,
    venv: Annotated[
        Path | None,
        typer.Option(
            envvar="NANOBOT_MEMORY_MEMOS_VENV",
            help="MemOS's venv (default <home>/venv); one venv can serve several homes.",
        ),
    ] = None,
) -> None:
    """Provision (if needed) and start MemOS + Postgres (+ Redis); prints the status JSON."""
    home = checked_home(home)
    settings = MemosServerSettings(
        home=(home or default_home()).absolute(),
        port=port,
        llm_base_url=llm_base_url,
        llm_api_key=llm_api_key,
        llm_model=llm_model,
        embed_base_url=embed_base_url,
        embed_api_key=embed_api_key,
        embed_model=embed_model,
        embed_dims=embed_dims,
        redis=redis,
        patch_postgres_filter=patch_postgres_filter,
        startup_timeout_s=timeout,
        venv=venv.absolute() if venv else None,
    )
    try:
        if provision_only:
            t0 = time.monotonic()
            provision(settings.home, settings.python, settings.venv)
            typer.echo(
                json.dumps({"provisioned": True, "seconds": round(time.monotonic() - t0, 1)})
            )
            return
        status = start_server(settings)
    except MemosServerError as exc:
        logger.error("memos-server: {}", exc)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(status, indent=2))


@memos_app.command()
def status(home: HomeOpt = None) -> None:
    """Print the server status as JSON (exit 1 when it is not running)."""
    st = server_status(checked_home(home, existing=True))
    typer.echo(json.dumps(st, indent=2))
    if not st["running"]:
        raise typer.Exit(1)


@memos_app.command()
def stop(home: HomeOpt = None) -> None:
    """Stop MemOS, Redis and Postgres cleanly."""
    typer.echo(json.dumps(stop_server(checked_home(home, existing=True)), indent=2))


if __name__ == "__main__":
    memos_app()
