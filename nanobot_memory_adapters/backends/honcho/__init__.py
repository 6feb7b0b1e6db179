"""Honcho v3 (honcho-ai 2.7.0 SDK) behind the contract: ``config.py`` the block and id
mapping, ``adapter.py`` the adapter, ``records.py`` records and group titles."""

from __future__ import annotations

from nanobot_memory_adapters.backends.honcho.adapter import HonchoAdapter
from nanobot_memory_adapters.backends.honcho.config import INFO, HonchoConfig, native_name

__all__ = ["INFO", "HonchoAdapter", "HonchoConfig", "native_name"]
