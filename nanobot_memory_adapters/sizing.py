"""How many native results a budget can show: the one place a token budget becomes a
result count. Kept out of the contract (a budget is data; how a provider sizes its native
call from it is policy, and changes with the labels ``formatting`` writes)."""

from __future__ import annotations

from nanobot_memory_adapters.contract import ContextBudget

#: Tokens an item's label takes in the memory section (``formatting``: ``- Jolene:`` and
#: its newline, plus its share of the ``### DATE TIME`` heading), as measured on LoCoMo
#: conv-26 (``benchmarks/bench_context_labels.py``: simple_rag 6.5, whose turns spread over
#: many days, full_history 1.7). tests/test_formatting.py checks a label without its
#: heading stays within it.
LABEL_TOKENS = 7


def top_k(budget: ContextBudget, item_text_tokens: int = 30, ceiling: int = 100) -> int:
    """How many native results to ask for: ``max_items``, or as many items as the budget
    can show — each costs its compact label (``LABEL_TOKENS``), its text (the provider's
    typical ``item_text_tokens``) and a newline — at most ``ceiling``."""
    if budget.max_items is not None:
        return budget.max_items
    per_item = LABEL_TOKENS + max(1, item_text_tokens) + 1
    return max(1, min(ceiling, budget.max_tokens // per_item))
