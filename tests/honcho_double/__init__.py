"""A wire-faithful Honcho v3 server double (tests only) and the probe that checks it
against a real Honcho server. See server.py and docs/honcho.md."""

from tests.honcho_double.server import HonchoDouble, HonchoDoubleApp

__all__ = ["HonchoDouble", "HonchoDoubleApp"]
