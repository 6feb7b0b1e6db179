"""MemPABench's two user-facing failures across tests: **reversion** (a preference the
agent acted on, forgotten again after later sessions) and **cross-context contamination**
(a preference of one context acted on in another).

Both are rates over *opportunities*, so an agent that never acts on a remembered value is
not rewarded with a clean 0: it has no opportunity, and its rate is n/a ("–"), never 0.

- **Reversion opportunity**: a behaviour test whose target the agent already acted on
  (first reply ``current``) in a test of the same persona and target at an *earlier* test
  point, the target still holding. **Reverted**: this later first reply does not act on
  it. Targets that are the attribute's default (``lexicon.default_key``: what an agent
  with no memory picks) are left out: acting on them needs no memory, so keeping them
  would credit no memory with perfect retention.
- **Contamination opportunity**: a behaviour test in one context (``work``) of an
  attribute whose value in another context (``personal``) the agent acted on, in that
  context, at this test point or an earlier one; that value is not the default (so the
  agent can only have it from memory). **Contaminated**: the first reply acts on another
  value of the attribute (``first_act`` ``other`` or ``both``: the generator's CS
  attributes have two values, one per context, so "another value" is the other
  context's). The default's direction (the work value acted on in a personal request)
  cannot be told apart from acting with no memory, and is not counted.

``annotate`` adds ``reversion`` and ``contamination`` (True / False / None = no
opportunity) to each of one provider's test records; ``scoring`` aggregates them like any
other 0/1 score (n, 95 % interval, paired verdicts over the opportunities both providers
had).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from nanobot_memory_adapters.harness.preferences.lexicon import default_key, domain_of


def is_default(record: dict[str, Any]) -> bool | None:
    """Whether the test's target is its attribute's default value (None: an attribute
    outside the phrase bank, e.g. PersonaMem's, whose default is unknown)."""
    domain = domain_of(record.get("attribute"))
    if domain is None:
        return None
    key = str(record["target"]).removeprefix(f"{record['persona']}-{domain.attribute}-")
    return key == default_key(domain)


def _acted(record: dict[str, Any]) -> bool | None:
    behaviour = record.get("behaviour")
    return None if not behaviour else bool(behaviour["correct"])


def annotate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One provider's test records (every persona), each copied with ``reversion`` and
    ``contamination``: True / False on an opportunity, None otherwise."""
    by_target: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    by_attribute: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if _acted(r) is None:
            continue
        by_target[(r["persona"], r["target"])].append(r)
        if r.get("attribute"):
            by_attribute[(r["persona"], r["attribute"])].append(r)
    out = []
    for r in records:
        reversion = contamination = None
        acted = _acted(r)
        if acted is not None and is_default(r) is False:
            earlier = [o for o in by_target[(r["persona"], r["target"])]
                       if int(o["point"]) < int(r["point"])]
            if any(_acted(o) for o in earlier):
                reversion = not acted
        if acted is not None and r.get("context"):
            shown = [o for o in by_attribute.get((r["persona"], r.get("attribute") or ""), [])
                     if o.get("context") and o["context"] != r["context"]
                     and int(o["point"]) <= int(r["point"]) and is_default(o) is False
                     and _acted(o)]
            if shown:
                contamination = r["behaviour"]["first_act"] in ("other", "both")
        out.append({**r, "reversion": reversion, "contamination": contamination})
    return out
