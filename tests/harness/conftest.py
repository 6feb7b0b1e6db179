"""Harness fixtures: a small synthetic LoCoMo-format file and test-only providers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nanobot_memory_adapters import registry

REPO = Path(__file__).resolve().parents[2]
LOCOMO7 = REPO.parent / "shared" / "data" / "locomo" / "locomo7.json"


def _turn(dia: str, speaker: str, text: str, **extra: str) -> dict:
    return {"speaker": speaker, "dia_id": dia, "text": text, **extra}


def synthetic_locomo() -> list[dict]:
    """Two conversations in LoCoMo's shape, with every quirk the loader must survive."""
    a, b = "Alice", "Bob"
    conv1 = {
        "speaker_a": a,
        "speaker_b": b,
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            _turn("D1:1", a, "I adopted a three-legged greyhound called Pistachio last week."),
            _turn("D1:2", b, "That is wonderful, how is Pistachio settling into the flat?"),
            _turn("D1:3", a, "Thanks!"),
            _turn(
                "D1:4",
                a,
                "Here is the mural I painted for the community library.",
                img_url="http://example.invalid/x.jpg",
                blip_caption="a photo of a mural",
            ),
        ],
        "session_2_date_time": "10:05 am on 9 June, 2023",
        "session_2": [
            _turn("D2:1", b, "I started learning the bassoon at the conservatory on Tuesdays."),
            _turn("D2:2", a, "Thanks!"),
            _turn("D2:3", a, "My sister Beatrice moved to Wellington in early June for work."),
            _turn("D2:4", b, "Wellington is windy, she should bring a sturdy umbrella along."),
        ],
        # Session keys need not be contiguous: there is no session_3.
        "session_4_date_time": "3:20 pm on 1 July, 2023",
        "session_4": [
            _turn("D4:1", a, "Pistachio won second prize at the county dog show yesterday."),
            _turn("D4:2", b, "Congratulations! My bassoon teacher says I am improving fast."),
            _turn("D4:3", a, "We are planning a camping trip to the Cairngorms in August."),
        ],
    }
    qa1 = [
        {
            "question": "What is the name of Alice's greyhound?",
            "answer": "Pistachio",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "When did Beatrice move to Wellington?",
            "answer": "early June 2023",
            "evidence": ["D2:3"],
            "category": 2,
        },
        {
            "question": "Which prize did the dog win, and what is its name?",
            "answer": "second",
            "evidence": ["D1:1; D4:1"],
            "category": 1,
        },
        {
            "question": "Would Alice enjoy hiking?",
            "answer": "likely",
            "evidence": [],
            "category": 3,
        },
        {
            "question": "Which instrument is Bob learning?",
            "answer": "bassoon",
            "evidence": ["D:2:01"],
            "category": 4,
        },
        {
            "question": "What is Alice's favourite colour?",
            "answer": "unknown",
            "evidence": ["D"],
            "category": 1,
        },
        {
            "question": "Where is Alice going camping?",
            "answer": "Cairngorms",
            "evidence": ["D4:9"],
            "category": 4,
        },
        {
            "question": "Where is Bob going camping?",
            "adversarial_answer": "Cairngorms",
            "evidence": ["D4:3"],
            "category": 5,
        },
    ]
    conv2 = {
        "speaker_a": "Chen",
        "speaker_b": "Dara",
        "session_1_date_time": "9:00 am on 2 March, 2022",
        "session_1": [
            _turn("D1:1", "Chen", "I just signed up for a pottery class in Kyoto next spring."),
            _turn("D1:2", "Dara", "I prefer rock climbing, I go to the gym every Thursday."),
        ],
        "session_2_date_time": "not a date",
        "session_2": [
            _turn("D2:1", "Chen", "My pottery teacher is called Master Hayashi, very strict."),
            _turn("D2:2", "Dara", "I sprained my wrist climbing, so no gym for a month now."),
        ],
    }
    qa2 = [
        {
            "question": "Where is Chen's pottery class?",
            "answer": "Kyoto",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "Who teaches Chen pottery?",
            "answer": "Master Hayashi",
            "evidence": ["D2:1"],
            "category": 4,
        },
        {
            "question": "Why did Dara stop going to the gym?",
            "answer": "sprained wrist",
            "evidence": ["D1:2", "D2:2"],
            "category": 1,
        },
    ]
    return [
        {"sample_id": "syn-1", "conversation": conv1, "qa": qa1},
        {"sample_id": "syn-2", "conversation": conv2, "qa": qa2},
    ]


@pytest.fixture
def locomo_file(tmp_path) -> Path:
    path = tmp_path / "locomo-synthetic.json"
    path.write_text(json.dumps(synthetic_locomo()), encoding="utf-8")
    return path


@pytest.fixture
def fake_providers(monkeypatch):
    """Register the test-only providers through the entry-point group, as a plugin would
    (beside the real ones, this package's built-ins among them)."""
    from tests.harness.fakes import FAKES

    class Dist:
        name = "test-fakes"

    class EP:
        def __init__(self, name: str, cls: type) -> None:
            self.name = name
            self.module = "tests.harness.fakes"
            self.attr = cls.__name__
            self.value = f"{self.module}:{self.attr}"
            self.extras: list[str] = []
            self.dist = Dist()

    real = registry.entry_points
    monkeypatch.setattr(
        registry,
        "entry_points",
        lambda group: (
            [*real(group=group), *(EP(n, c) for n, c in FAKES.items())]
            if group == registry.ENTRY_POINT_GROUP
            else real(group=group)
        ),
    )
    return FAKES


def mem0_installed() -> bool:
    try:
        import mem0  # noqa: F401
    except ImportError:
        return False
    return True
