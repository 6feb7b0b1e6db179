"""Lines of the plugin's own state that name a session or a scope (a phone number, an
e-mail address, who asked to be forgotten) pass the audience gate as the operator's: a
group chat's /memory-health or /memory-mode gets the line without them. Before, a member
of a WhatsApp group read "busy: recording turn 3 of whatsapp:4915550001@s.whatsapp.net"
and a backfill note listing a forgotten person's scope."""

from __future__ import annotations

import time
from typing import Any, cast

from nanobot_memory_adapters.contract import MemoryScope
from nanobot_memory_adapters.nanobot.audience import Audience, admitted
from nanobot_memory_adapters.nanobot.backfill import BackfillPlan
from nanobot_memory_adapters.nanobot.backfill_chat import Backfill, BackfillProgress
from nanobot_memory_adapters.nanobot.state import Activity

PHONE = "4915550001"
GROUP = Audience(frozenset({"default/whatsapp-_group:team"}), one_person=False)
OPERATOR = Audience(frozenset(), one_person=True, operator=True)


def test_the_turn_being_recorded_is_named_to_the_operator_only():
    line = Activity("recording a turn", time.time(), f"turn 3 of whatsapp:{PHONE}@s.whatsapp.net"
                    ).line()
    assert PHONE not in admitted(line, GROUP)
    assert admitted(line, GROUP).startswith("busy: recording a turn for ")
    assert PHONE in admitted(line, OPERATOR)
    assert Activity("starting provider 'mem0'", time.time()).line().origin == "plain"


def test_a_chat_backfill_note_counts_forgotten_scopes_without_naming_them():
    plan = BackfillPlan(forgotten=4, forgotten_scopes={f"default/whatsapp-{PHONE}"})
    assert PHONE in plan.notes()[0]  # the CLI, on the machine
    [note] = plan.notes(name_scopes=False)
    assert PHONE not in note and "4 turn(s) of 1 forgotten scope(s) skipped" in note


def test_a_finished_backfills_readiness_is_the_operators():
    backfill = Backfill(cast(Any, None), switch=cast(Any, None), delivery=cast(Any, None))
    scope = MemoryScope(run_id="default", persona_id=f"whatsapp-{PHONE}", agent_id="nanobot")
    backfill.progress = BackfillProgress("mem0", 5, 5, time.time(), [scope], done=True,
                                         readiness=[f"readiness {scope.key}: ready"])
    line = backfill.line()
    assert line is not None
    assert admitted(line, GROUP) == "backfill into mem0: done (5 turn(s))"
    assert PHONE in admitted(line, OPERATOR)
    backfill.progress.stopped = f"did not finish (error in default/whatsapp-{PHONE})"
    backfill.progress.stopped_by_error = True
    line = backfill.line()
    assert line is not None and PHONE not in admitted(line, GROUP)
    assert PHONE in admitted(line, OPERATOR)
