"""Honcho v3 (honcho-ai 2.7.0 SDK) behind the contract: ``config.py`` the block and id
mapping, ``store.py`` the native store, ``records.py`` records and group titles."""

from __future__ import annotations

from nanobot_memory_adapters.backends.honcho.config import INFO, HonchoConfig, native_name
from nanobot_memory_adapters.backends.honcho.store import HonchoStore

__all__ = ["INFO", "HonchoConfig", "HonchoStore", "native_name"]
