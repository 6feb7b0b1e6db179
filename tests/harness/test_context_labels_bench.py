"""``benchmarks/bench_context_labels.py --format-blind``: the share of a section that is not
the shown turns' own text, read from the traces without knowing the label grammar."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from nanobot_memory_adapters.tokens import count_tokens

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_context_labels.py"


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_context_labels", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TEXTS = {"e1": "I adopted a grey cat called Pixel last week.",
         "e2": "My sister moved to Porto in March."}


def _traces(tmp_path: Path, context: str, shown: list[str]) -> Path:
    recs: list[dict[str, object]] = [
        {"kind": "record", "unit": "u", "event_id": e, "text": t, "status": "committed"}
        for e, t in TEXTS.items()]
    recs.append({"kind": "record", "unit": "u", "event_id": "e3", "text": "never stored",
                 "status": "failed"})
    recs.append({"kind": "ask", "unit": "u", "provider": "p", "question_id": "q1",
                 "question": "Where does my sister live?", "budget_tokens": 2000,
                 "evidence_text": {"D1:2": TEXTS["e2"]}, "context_sha256": "s",
                 "context": context, "shown_sources": [[e] for e in shown],
                 "ranked_sources": [[e] for e in shown]})
    (tmp_path / "traces.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return tmp_path


def test_the_share_is_everything_but_the_shown_turns_text(tmp_path):
    context = ('<memory-context backend="p" scope="u">\n### 2023-05-08 13:56\n'
               f"- [.57 Ana #992] {TEXTS['e1']}\n- [.40 Ana #387] {TEXTS['e2']}\n"
               "</memory-context>")
    out = _bench().format_blind(_traces(tmp_path, context, ["e1", "e2"]), 2000, None)
    total = count_tokens(context)
    text = count_tokens(TEXTS["e1"]) + count_tokens(TEXTS["e2"])
    row = out["providers"]["p"]
    assert row["asks"] == 1
    assert abs(row["pooled_share"] - round((total - text) / total, 4)) < 1e-9
    assert 0.5 < row["pooled_share"] < 0.9  # two short turns: the frame and labels dominate


def test_a_bare_section_reads_zero_and_labels_raise_it(tmp_path):
    bare = f"{TEXTS['e1']}\n{TEXTS['e2']}"
    out = _bench().format_blind(_traces(tmp_path, bare, ["e1", "e2"]), 2000, None)
    assert out["providers"]["p"]["pooled_share"] < 0.05  # only the newline between them
    labelled = bare.replace("I adopted", "- [.99 Ana #001 2023-05-08] I adopted")
    again = _bench().format_blind(_traces(tmp_path, labelled, ["e1", "e2"]), 2000, None)
    assert again["providers"]["p"]["pooled_share"] > out["providers"]["p"]["pooled_share"]


def test_bare_pack_keeps_order_and_skips_what_does_not_fit():
    bench = _bench()
    long = "word " * 50
    assert bench._bare_pack(["a b c", long, "d e"], 20) == ["a b c", "d e"]
    assert bench._bare_pack(["a b c", "d e"], 2) == []


def test_an_image_turns_caption_counts_as_its_text(tmp_path):
    """What was stored is the turn's text plus its image caption (LoCoMo's
    ``blip_caption``); the record line carries it as ``content``, and the share counts it
    as the turn's own text, not as a label."""
    caption = " [shares a photo: a grey cat asleep on a keyboard]"
    context = ('<memory-context backend="p" scope="u">\n'
               f"{TEXTS['e1']}{caption}\n{TEXTS['e2']}\n</memory-context>")
    out = tmp_path / "with"
    out.mkdir()
    traces = _traces(out, context, ["e1", "e2"])
    recs = [json.loads(line) for line in (traces / "traces.jsonl").read_text().splitlines()]
    without = _bench().format_blind(traces, 2000, None)["providers"]["p"]["pooled_share"]
    recs[0]["content"] = TEXTS["e1"] + caption
    (traces / "traces.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    share = _bench().format_blind(traces, 2000, None)["providers"]["p"]["pooled_share"]
    frame = count_tokens('<memory-context backend="p" scope="u">\n') + count_tokens(
        "\n</memory-context>")
    assert share < without
    assert share <= (frame + 2) / count_tokens(context)  # the frame and the newlines only


def test_the_grammar_mode_refuses_todays_labels_and_reads_the_old_ones(tmp_path, capsys):
    """The grammar mode knows only the bracket-with-id labels of before 2026-11-28; on
    today's sections (speaker before the text, no id) it would count the speaker as text,
    so it refuses them in one line and points to ``--format-blind``."""
    bench = _bench()
    new = tmp_path / "new"
    new.mkdir()
    _traces(new, '<memory-context backend="p" scope="u">\n### 2023-05-08 13:56\n'
            f"- Ana: {TEXTS['e1']}\n</memory-context>", ["e1"])
    assert bench.main([str(new)]) == 2
    err = capsys.readouterr().err
    assert "--format-blind" in err and len(err.strip().splitlines()) == 1
    old = tmp_path / "old"
    old.mkdir()
    _traces(old, '<memory-context backend="p" scope="u">\n### 2023-05-08 13:56\n'
            f"- [.57 Ana #992] {TEXTS['e1']}\n</memory-context>", ["e1"])
    assert bench.main([str(old), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["p"]
    assert row["items_shown_mean"] == 1 and row["label_tokens_per_item_median"] > 5
