"""Graphiti's structured prompts (graphiti-core 0.31.1), answered by explicit rules.

Dispatch is on the ``json_schema`` name Graphiti's ``OpenAIGenericClient`` sends (the
response model's class name). Every answer is derived from the prompt's own sections
(CURRENT MESSAGE, ENTITIES, NEW FACT, REFERENCE TIME...) with a tiny statement grammar:

- A line ``speaker: text`` is split into sentences; first person is rewritten to the
  speaker (``I live in Paris`` said by ``alice`` -> ``alice lives in Paris``).
- Known predicates, each with a *relation family*:
  ``lives in`` / ``moved to`` / ``relocated to`` / ``is based in`` -> residence (exclusive);
  ``works at|for`` / ``joined`` -> employer (exclusive);
  ``<owner>'s favorite <thing> is <Y>`` -> favorite <thing> (exclusive);
  ``likes|loves|enjoys|prefers`` -> likes (not exclusive).
- Any other first-person statement ``<speaker> <verb> <object...>`` becomes a fact about
  the speaker with the verb as its relation (not exclusive). Questions are skipped.
- Contradiction (EdgeDuplicate): the NEW FACT and an older fact parse to the same subject
  and the same exclusive family with a different object. Duplicate: the same fact text
  (so "lives in Kyoto" after an invalidated "moved to Kyoto" is a new, current fact).
- Times: ``valid_at`` is the episode's own timestamp (or REFERENCE_TIME); no ``invalid_at``
  is ever made up.

No answer is looked up from a table of expected outputs. Every reply validates against
the schema Graphiti sent, so Graphiti never retries (its retry backoff is >= 5 s).
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

from tests.llm_double.server import ChatReply, ChatRequest, json_reply

NAME = "graphiti"

# -- the statement grammar ---------------------------------------------------------------

_SPEAKER_LINE = re.compile(r"^\s*([^:\n]{1,80}?):\s+(.+)$")
_EPISODE_HEADER = re.compile(
    r"^\[(Episode (\d+)|CONTEXT EPISODE)\] \(timestamp: ([^)]*)\)\s*$", re.M
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# Where an object phrase ends.
_OBJECT_STOP = re.compile(
    r"\s*(?:[,;:!?()]|\.(?:\s|$)|\s(?:and|but|because|since|so|which|who|where|when|"
    r"while|until|although|though|now|today|yesterday|tomorrow|recently|anymore|"
    r"last|next|this|these|every|each|ago|for|with|from|as|if|then)\b)",
    re.I,
)
_DETERMINERS = re.compile(r"^(?:a|an|the|some|any)\s+", re.I)
_FILLER = {
    "also", "just", "recently", "now", "still", "really", "actually", "finally", "already",
    "has", "have", "had", "did", "do", "does", "is", "am", "was", "were", "then", "since",
    "so", "and", "but", "officially", "only", "usually", "always", "never", "often",
}
_PRONOUNS = {
    "you", "he", "she", "it", "we", "they", "this", "that", "there", "those", "these",
    "who", "what", "which", "i", "me", "us", "them", "him", "her", "one", "someone",
}
_NOT_A_VERB = {
    "am", "is", "are", "was", "were", "be", "been", "to", "the", "a", "an", "not", "don't",
    "do", "did", "will", "would", "can", "could", "should", "may", "might", "must",
}


class Predicate:
    def __init__(
        self, family: str, exclusive: bool, pattern: str, relation: str, template: str
    ) -> None:
        self.family = family
        self.exclusive = exclusive
        self.regex = re.compile(rf"(?<![\w'])(?:{pattern})\s+", re.I)
        self.relation = relation
        self.template = template


PREDICATES = [
    Predicate("residence", True, r"(?:lives?|living|resides?|residing)\s+in", "LIVES_IN",
              "{s} lives in {o}"),
    Predicate("residence", True, r"(?:moved|relocated|has moved|has relocated)\s+to",
              "LIVES_IN", "{s} moved to {o}"),
    Predicate("residence", True, r"(?:is|am|are)\s+(?:now\s+)?based\s+in", "LIVES_IN",
              "{s} is based in {o}"),
    Predicate("employer", True, r"(?:works?|working)\s+(?:at|for)", "WORKS_AT",
              "{s} works at {o}"),
    Predicate("employer", True, r"joined|(?:started|starts)\s+working\s+(?:at|for)",
              "WORKS_AT", "{s} joined {o}"),
    Predicate("favorite", True, r"(?:favou?rite)\s+(?P<what>[a-z]+)\s+(?:is|are)",
              "HAS_FAVORITE", "{s}'s favorite {what} is {o}"),
    Predicate("likes", False, r"likes?|loves?|enjoys?|prefers?|adores?", "LIKES",
              "{s} likes {o}"),
]


class Statement:
    """One parsed claim: subject, relation family, object, the fact sentence."""

    def __init__(
        self, subject: str, family: str, exclusive: bool, obj: str, relation: str, fact: str
    ) -> None:
        self.subject = subject
        self.family = family
        self.exclusive = exclusive
        self.object = obj
        self.relation = relation
        self.fact = fact

    def key(self) -> tuple[str, str]:
        return (_norm(self.subject), self.family)


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower().replace("'s", "")))


def _third_person(sentence: str, speaker: str) -> str:
    s = sentence
    s = re.sub(r"\bI'm\b|\bI am\b", f"{speaker} is", s)
    s = re.sub(r"\bI've\b", f"{speaker} has", s)
    s = re.sub(r"\bI'll\b", f"{speaker} will", s)
    s = re.sub(r"\bI'd\b", f"{speaker} would", s)
    s = re.sub(r"\bI\b", speaker, s)
    s = re.sub(r"\b[Mm]y\b", f"{speaker}'s", s)
    s = re.sub(r"\b[Mm]e\b", speaker, s)
    return s


def _object(rest: str) -> str:
    match = _OBJECT_STOP.search(rest)
    phrase = rest[: match.start()] if match else rest
    phrase = _DETERMINERS.sub("", phrase.strip().rstrip("."))
    words = phrase.split()
    return " ".join(words[:5]).strip(" '\"")


def _subject(prefix: str, speakers: list[str]) -> str | None:
    """The subject at the end of ``prefix`` (a speaker name or a capitalized name)."""
    prefix = prefix.strip().rstrip(",")
    if prefix.endswith("'s"):
        prefix = prefix[:-2]
    for name in sorted(speakers, key=len, reverse=True):
        if re.search(rf"(?:^|\W){re.escape(name)}$", prefix):
            return name
    words = prefix.split()
    while words and words[-1].lower() in _FILLER:
        words.pop()
    if not words:
        return None
    for name in sorted(speakers, key=len, reverse=True):
        if " ".join(words).endswith(name):
            return name
    # A trailing run of capitalized words ("Alice", "Maria Lopez").
    run: list[str] = []
    for word in reversed(words):
        if word[:1].isupper() and word.lower() not in _PRONOUNS:
            run.insert(0, word)
        else:
            break
    if run:
        return " ".join(run)
    if not speakers:  # parsing a stored fact: the whole prefix is the subject
        subject = " ".join(words)
        return subject if subject.lower() not in _PRONOUNS else None
    return None


def parse_sentence(sentence: str, speakers: list[str], speaker: str | None) -> Statement | None:
    """A claim in one sentence, or None."""
    sentence = sentence.strip()
    if not sentence or sentence.endswith("?"):
        return None
    text = _third_person(sentence, speaker) if speaker else sentence
    for pred in PREDICATES:
        match = pred.regex.search(text)
        if not match:
            continue
        subject = _subject(text[: match.start()], speakers)
        obj = _object(text[match.end():])
        if not subject or not obj or _norm(obj) == _norm(subject):
            continue
        what = (match.groupdict().get("what") or "").lower()
        family = f"{pred.family}:{what}" if what else pred.family
        relation = f"{pred.relation}_{what.upper()}" if what else pred.relation
        fact = pred.template.format(s=subject, o=obj, what=what)
        return Statement(subject, family, pred.exclusive, obj, relation, fact)
    if speaker is None:
        return _generic(text, speakers)
    return _generic(text, [speaker])


def _stem(verb: str) -> str:
    return verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb


def _generic(text: str, subjects: list[str]) -> Statement | None:
    """``<subject> <verb> <object>``: a non-exclusive fact with the verb as relation."""
    for subject in sorted(subjects, key=len, reverse=True):
        match = re.match(
            rf"^(?:[A-Za-z]+\s+){{0,3}}?{re.escape(subject)}\s+((?:[a-z]+\s+){{0,2}}?)"
            rf"([a-z]+(?:s|ed)?)\s+(.+)$",
            text,
        )
        if not match:
            continue
        adverbs = match.group(1).split()
        if any(w not in _FILLER for w in adverbs):
            continue
        verb = match.group(2)
        if verb in _NOT_A_VERB:
            continue
        obj = _object(match.group(3))
        if not obj:
            continue
        third = verb if verb.endswith(("s", "ed")) else verb + "s"
        fact = f"{subject} {third} {match.group(3).rstrip('.!').strip()}"
        return Statement(subject, f"verb:{_stem(verb)}", False, obj, third.upper(), fact)
    if not subjects:
        # A stored fact: "<subject words> <verb> <rest>" where the subject is unknown.
        match = re.match(r"^(\S+(?:\s+[A-Z]\S*)*)\s+([a-z]+)\s+(.+)$", text)
        if match and match.group(2) not in _NOT_A_VERB:
            obj = _object(match.group(3))
            if obj:
                verb = match.group(2)
                return Statement(match.group(1), f"verb:{_stem(verb)}", False, obj,
                                 verb.upper(), text.rstrip(".!"))
    return None


# -- episode content ---------------------------------------------------------------------


class Episode:
    def __init__(self, index: int | None, timestamp: str | None, body: str) -> None:
        self.index = index  # None: a context-only episode
        self.timestamp = timestamp
        self.body = body

    def lines(self) -> list[tuple[str | None, str]]:
        out: list[tuple[str | None, str]] = []
        for raw in self.body.splitlines():
            if not raw.strip():
                continue
            match = _SPEAKER_LINE.match(raw)
            if match and len(match.group(1).split()) <= 4:
                out.append((match.group(1).strip(), match.group(2)))
            else:
                out.append((None, raw))
        return out

    def speakers(self) -> list[str]:
        seen: list[str] = []
        for speaker, _ in self.lines():
            if speaker and speaker not in seen:
                seen.append(speaker)
        return seen

    def statements(self) -> list[Statement]:
        speakers = self.speakers()
        found: list[Statement] = []
        for speaker, text in self.lines():
            for sentence in _SENTENCE_END.split(text):
                st = parse_sentence(sentence, speakers, speaker)
                if st is not None:
                    found.append(st)
        return found


def split_episodes(content: str) -> list[Episode]:
    """``[Episode N] (timestamp: ...)`` sections, or the whole text as episode 0."""
    headers = list(_EPISODE_HEADER.finditer(content))
    if not headers:
        return [Episode(0, None, content)]
    episodes = []
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(content)
        body = content[header.end():end].strip()
        index = int(header.group(2)) if header.group(2) is not None else None
        episodes.append(Episode(index, header.group(3), body))
    return episodes


def section(text: str, tag: str) -> str | None:
    match = re.search(rf"<{re.escape(tag)}>\n?(.*?)\n?</{re.escape(tag)}>", text, re.S)
    return match.group(1) if match else None


def json_section(text: str, tag: str) -> Any:
    body = section(text, tag)
    if body is None:
        return None
    body = body.strip()
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        # A Python repr (Graphiti formats some lists with str()).
        try:
            import ast

            return ast.literal_eval(body)
        except (ValueError, SyntaxError):
            return None


def iso_z(value: str | None) -> str | None:
    """An ISO 8601 UTC string with a Z suffix, from whatever time text the prompt holds."""
    if not value:
        return None
    value = value.split("#")[0].strip()
    if not value or value == "unknown":
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- handlers ----------------------------------------------------------------------------


def _entities_of(episodes: list[Episode]) -> list[tuple[str, list[int]]]:
    """Speakers first, then subjects and objects of every statement, once each."""
    names: dict[str, tuple[str, list[int]]] = {}

    def add(name: str, index: int) -> None:
        key = _norm(name)
        if not key:
            return
        if key not in names:
            names[key] = (name, [])
        if index not in names[key][1]:
            names[key][1].append(index)

    for ep in episodes:
        if ep.index is None:
            continue
        for speaker in ep.speakers():
            add(speaker, ep.index)
        for st in ep.statements():
            add(st.subject, ep.index)
            add(st.object, ep.index)
    return list(names.values())


def _edges_of(episodes: list[Episode], known: dict[str, str]) -> list[dict[str, Any]]:
    edges: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for ep in episodes:
        if ep.index is None:
            continue
        for st in ep.statements():
            source = known.get(_norm(st.subject), st.subject)
            target = known.get(_norm(st.object), st.object)
            key = (_norm(source), st.relation, _norm(target))
            if key in seen or _norm(source) == _norm(target):
                continue
            seen.add(key)
            edges.append(
                {
                    "source_entity_name": source,
                    "target_entity_name": target,
                    "relation_type": st.relation,
                    "fact": st.fact,
                    "episode_indices": [ep.index],
                    "_timestamp": ep.timestamp,
                }
            )
    return edges


def extracted_entities(req: ChatRequest) -> ChatReply | None:
    """ExtractedEntities: speakers plus the subjects and objects of parsed statements."""
    text = req.user
    content = section(text, "CURRENT MESSAGE") or section(text, "TEXT") or section(text, "JSON")
    if content is None:
        return json_reply({"extracted_entities": []}, f"{NAME}.ExtractedEntities")
    entities = [
        {"name": name, "entity_type_id": 0, "episode_indices": indices}
        for name, indices in _entities_of(split_episodes(content))
    ]
    return json_reply({"extracted_entities": entities}, f"{NAME}.ExtractedEntities")


def extracted_edges(req: ChatRequest) -> ChatReply | None:
    """ExtractedEdges: one fact per parsed statement, dated by its episode."""
    text = req.user
    content = section(text, "CURRENT_MESSAGE") or ""
    nodes = json_section(text, "ENTITIES") or []
    known = {_norm(n["name"]): n["name"] for n in nodes if isinstance(n, dict) and "name" in n}
    reference = iso_z(section(text, "REFERENCE_TIME"))
    edges = []
    for edge in _edges_of(split_episodes(content), known):
        stamp = iso_z(edge.pop("_timestamp")) or reference
        edges.append({**edge, "valid_at": stamp, "invalid_at": None})
    return json_reply({"edges": edges}, f"{NAME}.ExtractedEdges")


def combined_extraction(req: ChatRequest) -> ChatReply | None:
    """CombinedExtraction (bulk ingest): entities and facts in one answer."""
    content = section(req.user, "CURRENT MESSAGES") or ""
    episodes = split_episodes(content)
    entities = _entities_of(episodes)
    known = {_norm(name): name for name, _ in entities}
    edges = []
    for edge in _edges_of(episodes, known):
        edge.pop("_timestamp")
        edges.append(edge)
    return json_reply(
        {
            "extracted_entities": [{"name": n, "entity_type_id": 0} for n, _ in entities],
            "edges": edges,
        },
        f"{NAME}.CombinedExtraction",
    )


def node_resolutions(req: ChatRequest) -> ChatReply | None:
    """NodeResolutions: a duplicate only when the normalized names are equal."""
    text = req.user
    extracted = json_section(text, "ENTITIES") or []
    existing = json_section(text, "EXISTING ENTITIES") or []
    by_name = {_norm(e.get("name", "")): e.get("candidate_id") for e in existing}
    resolutions = []
    for entity in extracted:
        duplicate = by_name.get(_norm(entity.get("name", "")))
        resolutions.append(
            {
                "id": entity["id"],
                "name": entity.get("name", ""),
                "duplicate_candidate_id": duplicate if isinstance(duplicate, int) else -1,
            }
        )
    return json_reply({"entity_resolutions": resolutions}, f"{NAME}.NodeResolutions")


def node_duplicate(req: ChatRequest) -> ChatReply | None:
    """NodeDuplicate (single-entity dedupe): same rule as NodeResolutions."""
    text = req.user
    entity = json_section(text, "NEW ENTITY") or {}
    existing = json_section(text, "EXISTING ENTITIES") or []
    name = str(entity.get("name", "")) if isinstance(entity, dict) else str(entity)
    match = next(
        (e.get("candidate_id") for e in existing
         if isinstance(e, dict) and _norm(e.get("name", "")) == _norm(name)),
        -1,
    )
    return json_reply(
        {"id": 0, "name": name, "duplicate_candidate_id": match if isinstance(match, int) else -1},
        f"{NAME}.NodeDuplicate",
    )


def _fact_list(text: str, tag: str) -> list[dict[str, Any]]:
    value = json_section(text, tag)
    return [f for f in value or [] if isinstance(f, dict) and "idx" in f]


def edge_duplicate(req: ChatRequest) -> ChatReply | None:
    """EdgeDuplicate: same fact text -> duplicate; same subject and exclusive family with a
    different object -> contradicted."""
    text = req.user
    existing = _fact_list(text, "EXISTING FACTS")
    candidates = _fact_list(text, "FACT INVALIDATION CANDIDATES")
    new_text = (section(text, "NEW FACT") or "").strip()
    new = parse_sentence(new_text, [], None)
    duplicates: list[int] = []
    contradicted: list[int] = []
    for fact in existing + candidates:
        old_text = str(fact.get("fact", ""))
        is_existing = fact in existing
        if _norm(old_text) == _norm(new_text):
            if is_existing:
                duplicates.append(fact["idx"])
            continue
        old = parse_sentence(old_text, [], None)
        if new is None or old is None or old.key() != new.key():
            continue
        if new.exclusive and _norm(old.object) != _norm(new.object):
            contradicted.append(fact["idx"])
    return json_reply(
        {"duplicate_facts": duplicates, "contradicted_facts": contradicted},
        f"{NAME}.EdgeDuplicate",
    )


def edge_timestamps(req: ChatRequest) -> ChatReply | None:
    """EdgeTimestamps: a stated fact holds from its reference time; no end is invented."""
    reference = iso_z(section(req.user, "REFERENCE TIME"))
    return json_reply({"valid_at": reference, "invalid_at": None}, f"{NAME}.EdgeTimestamps")


def batch_edge_timestamps(req: ChatRequest) -> ChatReply | None:
    facts = json_section(req.user, "FACTS") or []
    stamps = [
        {"valid_at": iso_z(str(f.get("reference_time"))), "invalid_at": None}
        for f in facts
        if isinstance(f, dict)
    ]
    return json_reply({"timestamps": stamps}, f"{NAME}.BatchEdgeTimestamps")


def summarized_entities(req: ChatRequest) -> ChatReply | None:
    """SummarizedEntities: each entity's summary is the sentences that mention it."""
    text = req.user
    entities = json_section(text, "ENTITIES") or []
    messages = section(text, "MESSAGES") or section(text, "EPISODES") or ""
    sentences: list[str] = []
    for line in messages.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        chunks = [value] if isinstance(value, str) else [
            v.get("content", "") for v in value if isinstance(v, dict)
        ] if isinstance(value, list) else []
        for chunk in chunks:
            sentences.extend(s.strip() for s in _SENTENCE_END.split(chunk) if s.strip())
    summaries = []
    for entity in entities:
        name = str(entity.get("name", ""))
        mentions = [s for s in sentences if name and name.lower() in s.lower()]
        if mentions:
            summary = " ".join(dict.fromkeys(mentions))[:240]
            summaries.append({"name": name, "summary": summary})
    return json_reply({"summaries": summaries}, f"{NAME}.SummarizedEntities")


def single_summary(req: ChatRequest) -> ChatReply | None:
    """EntitySummary / Summary / SummaryDescription: the first sentences of the input."""
    words = " ".join(req.user.split()).split()
    text = " ".join(words[-40:])
    key = {"SummaryDescription": "description"}.get(req.schema_name or "", "summary")
    return json_reply({key: text}, f"{NAME}.{req.schema_name}")


def attributes(req: ChatRequest) -> ChatReply | None:
    """A custom entity/edge type's attributes: only what the schema leaves optional (null)."""
    if "attribute extraction specialist" not in req.system:
        return None
    schema = (req.response_format.get("json_schema") or {}).get("schema") or {}
    props = schema.get("properties") or {}
    return json_reply({name: None for name in props}, f"{NAME}.attributes")


def reranker(req: ChatRequest) -> ChatReply | None:
    """OpenAIRerankerClient's boolean prompt, answered with logprobs from word overlap."""
    if not req.body.get("logprobs") or "<PASSAGE>" not in req.user:
        return None
    passage = set(re.findall(r"[a-z0-9]+", (section(req.user, "PASSAGE") or "").lower()))
    query = set(re.findall(r"[a-z0-9]+", (section(req.user, "QUERY") or "").lower()))
    overlap = len(passage & query) / max(1, len(query))
    relevant = overlap > 0
    p = min(0.99, 0.5 + overlap / 2) if relevant else 0.9
    token, other = ("True", "False") if relevant else ("False", "True")
    lp, lq = math.log(p), math.log(1 - p)
    logprobs = {
        "content": [
            {
                "token": token,
                "logprob": lp,
                "bytes": None,
                "top_logprobs": [
                    {"token": token, "logprob": lp, "bytes": None},
                    {"token": other, "logprob": lq, "bytes": None},
                ],
            }
        ]
    }
    return ChatReply(content=token, logprobs=logprobs, handler=f"{NAME}.reranker")


_BY_SCHEMA = {
    "ExtractedEntities": extracted_entities,
    "ExtractedEdges": extracted_edges,
    "CombinedExtraction": combined_extraction,
    "NodeResolutions": node_resolutions,
    "NodeDuplicate": node_duplicate,
    "EdgeDuplicate": edge_duplicate,
    "EdgeTimestamps": edge_timestamps,
    "BatchEdgeTimestamps": batch_edge_timestamps,
    "SummarizedEntities": summarized_entities,
    "EntitySummary": single_summary,
    "Summary": single_summary,
    "SummaryDescription": single_summary,
}


def graphiti_structured(req: ChatRequest) -> ChatReply | None:
    handler = _BY_SCHEMA.get(req.schema_name or "")
    if handler is not None:
        return handler(req)
    if req.schema_name:
        return attributes(req)
    return None


HANDLERS = [graphiti_structured, reranker]
