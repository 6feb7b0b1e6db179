"""Controlled conditions: labeled baselines that obey the same contract and read-only gate.

They are controls, not memory architectures; traces carry ``condition_kind=control``.
"""
