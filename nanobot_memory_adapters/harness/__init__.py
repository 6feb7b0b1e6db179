"""The harness: swap flow, LoCoMo timeline benchmark, metrics, manifests and reports.

It depends on the contract (and the registry to build providers) only, never on a
backend's internals. Entry points: ``swap.run_swap``, ``timeline.run_bench`` and the
``nanobot-memory swap|bench|demo`` commands in ``harness/cli.py``.
"""
