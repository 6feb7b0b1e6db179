"""Credential scrubbing: the one redaction every string leaving the package goes through.

- a key that names a credential (``api_key``, ``password``, ``token``..., or an
  environment variable's name ending in ``_KEY``/``_PASS``) has its value replaced by
  ``***``, and so has the argument after a command-line flag that names one
  (``["--api-key", VALUE]``);
- in any text: a ``user:password@`` inside a URL or DSN loses the password, a credential
  parameter (``?api_key=…``, ``&token=…``, ``password=…``) loses its value, and an
  ``Authorization: Bearer …`` token is replaced;
- a key-shaped string (``sk-…``, ``ghp_…``, ``hf_…``, ``AKIA…``, a JWT) anywhere keeps its
  prefix and loses the rest (``sk-***``): a key pasted into a model name or a URL by
  mistake is not shown in health details or errors.

Used by traces (``tracing``), ``AdapterError``, health reports and receipts (the contract's
models apply it to their free-text fields), command replies, CLI output and the package's
log lines (``logs.logger``).

Linear time, by construction (a multi-megabyte turn is scrubbed in one pass): text is
scanned left to right for a few fixed cues (``://``, ``bearer``/``basic``, a name followed
by ``=``/``:``) and every regex is either such a search, whose cost per position is
bounded (a fixed-width look-behind, a literal of at most 13 characters, or a run of
whitespace it also consumes), or anchored at a position with possessive repetition (its
cost is what it consumes). ``scrub_work`` returns the characters the matches span; it
does not count the regex engine's steps (a search that backtracks and fails adds
nothing), so it is no bound: the test that can fail scrubs crafted 1 MiB inputs in a
child process killed at a hard time cap (tests/test_secrets.py). Without key-shaped
strings, the result equals that of the three ``re.sub`` patterns this module used
before (tested against them).
"""

from __future__ import annotations

import re
from typing import Any

_SECRET_WORDS = (
    r"api[_-]?key|apikey|secret|secret[_-]?key|access[_-]?key|private[_-]?key|"
    r"password|passwd|pwd|token|access[_-]?token|auth[_-]?token|authorization|credentials?"
)
_SECRET_KEY = re.compile(rf"(^|[_-])({_SECRET_WORDS})$", re.I)
# an environment variable's name (upper case) that ends in KEY or PASS: UPSTREAM_SERVICE_KEY
_SECRET_ENV = re.compile(r"^[A-Z][A-Z0-9_]*_(?:KEY|PASS|PASSWORD|PW)$")
# a command line's flag that names a credential: its value is the next argument
_SECRET_FLAG = re.compile(rf"^--?(?:[a-z0-9]+[_-])*(?:{_SECRET_WORDS})$", re.I)
_WORD = re.compile(rf"(?:{_SECRET_WORDS})", re.I)
_WORD_LENGTHS = sorted({3, *range(5, 14)}, reverse=True)  # "pwd" .. "authorization"
REDACTED = "***"

# user:password@host inside URLs and DSNs. Tried only where a run of scheme characters
# starts (the look-behind), possessively: each character is scanned a bounded number of times.
_URL_PASSWORD = re.compile(
    r"(?<![a-z0-9+.-])[0-9+.-]*+[a-z][a-z0-9+.-]*+://[^:/@\s]*+:(?P<pw>[^@/\s]++)@", re.I
)
# Authorization: Bearer|Basic <token>
_BEARER_CUE = re.compile(r"\b(?:Bearer|Basic)", re.I)
_SPACES = re.compile(r"\s*+")
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{4,}+", re.I)
# name=value where the name is a credential: query strings, DSN parameters, plain text
_PARAM_CUE = re.compile(rf"(?:{_SECRET_WORDS})(?=['\"]?\s*+[=:])", re.I)  # a word, then = or :
_NAME_RUN = re.compile(r"[a-z0-9_-]++", re.I)  # on the reversed text: back to the run start
_CHAIN = re.compile(r"(?:[_-][a-z0-9]++)*+", re.I)  # reversed "seg_seg-" before a word
_SEP_VALUE = re.compile(
    r"(?P<sep>['\"]?\s*+[=:]\s*+)(?P<quote>['\"]?)(?P<value>[^\s&'\",;)}\]]++)"
)
_BOUNDARY = re.compile(r"\b")
# API keys by their shape, wherever they stand (a key pasted into a model name or a URL):
# a known prefix at the start of a token, then 16+ key characters with a digit among them;
# or a JWT. Tried only at token starts (the look-behinds), possessively.
_KEY_SHAPED = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<kind>sk-|sk_live_|sk_test_|rk_live_|gh[pousr]_|github_pat_|"
    r"glpat-|hf_|gsk_|xox[abprs]-|AKIA|ASIA|AIza)(?=[A-Za-z_-]*+[0-9])[A-Za-z0-9_-]{16,}+"
    r"|(?<![A-Za-z0-9_-])(?P<jwt>eyJ)[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+"
    r"\.[A-Za-z0-9_-]{8,}+"
)


# Substrings (lower case) at least one of which every redaction needs: "://" (a URL
# password), "bearer"/"basic", a credential word (each of ``_SECRET_WORDS`` contains one
# of key/secret/passw/pwd/token/authorization/credential) or a key shape's prefix.
_CUES = ("://", "bearer", "basic", "key", "secret", "passw", "pwd", "token",
         "authorization", "credential", "sk-", "sk_", "rk_live_", "ghp_", "gho_", "ghu_",
         "ghs_", "ghr_", "github_pat_", "glpat-", "hf_", "gsk_", "xox", "akia", "asia",
         "aiza", "eyj")


def may_hold_a_secret(text: str) -> bool:
    """False only when ``redact_text`` would return ``text`` unchanged: ASCII text without
    any cue. (Case-insensitive matching of non-ASCII text folds more than ``lower``
    does, e.g. a dotless i; such text always takes the full scan.)"""
    if not text.isascii():
        return True
    low = text.lower()
    return any(cue in low for cue in _CUES)


def redact_text(text: str) -> str:
    """``text`` with URL passwords, credential parameters and bearer tokens replaced."""
    if not text or not may_hold_a_secret(text):  # the common case: one cheap pass
        return text
    return scrub_work(text)[0]


def scrub_work(text: str) -> tuple[str, int]:
    """``redact_text``'s result and the characters its matches spanned (see the module
    docstring: not the regex engine's steps)."""
    work = [0]
    text = _url_passwords(text, work)
    text = _bearer_tokens(text, work)
    text = _params(text, work)
    return _key_shapes(text, work), work[0]


def redact_shapes(text: str) -> str:
    """``text`` with URL passwords and key-shaped tokens (``sk-…``, ``ghp_…``, a JWT)
    replaced, and nothing else: for prose that names settings (an error line saying
    ``api_key: refers to …`` would lose its next word to ``redact_text``)."""
    if not text or not may_hold_a_secret(text):
        return text
    work = [0]
    return _key_shapes(_url_passwords(text, work), work)


def names_a_secret(key: str) -> bool:
    """A setting's name says it holds a credential (``api_key``, ``token``, ...); dotted
    paths are judged by their last part."""
    return _SECRET_KEY.search(key.rsplit(".", 1)[-1]) is not None


def looks_like_a_key(text: str) -> bool:
    """``text`` holds an API key by its shape (``sk-…``, ``ghp_…``, ``AKIA…``, a JWT)."""
    return _KEY_SHAPED.search(text) is not None


def is_variable_name(text: str) -> bool:
    """``text`` can be the NAME of an environment variable and is not more likely a key
    pasted where a name was asked (every ``--...-key-env`` option and the setup wizard
    check it, so a key never lands in a config, a manifest or a report as a "name"): a
    key by its shape; or, when no such variable is set, a key's prefix (``gsk_``, ``hf_``,
    ``AKIA``: tried on the text padded to a key's length) or a long mix of upper and lower
    case and digits."""
    import os

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text) or looks_like_a_key(text):
        return False
    if text in os.environ:
        return True
    mixed = (any(c.islower() for c in text) and any(c.isupper() for c in text)
             and any(c.isdigit() for c in text))
    return not (looks_like_a_key(text + "0" * 16) or (mixed and len(text) >= 20))


def _key_shapes(text: str, work: list[int]) -> str:
    out: list[str] = []
    done = 0
    while (m := _KEY_SHAPED.search(text, done)) is not None:
        work[0] += m.end() - done
        out += [text[done:m.start()], m.group("kind") or m.group("jwt"), REDACTED]
        done = m.end()
    work[0] += len(text) - done
    out.append(text[done:])
    return "".join(out)


def _url_passwords(text: str, work: list[int]) -> str:
    out: list[str] = []
    done = 0
    while (m := _URL_PASSWORD.search(text, done)) is not None:
        work[0] += m.end() - done
        out += [text[done:m.start("pw")], REDACTED, "@"]
        done = m.end()
    work[0] += len(text) - done
    out.append(text[done:])
    return "".join(out)


def _bearer_tokens(text: str, work: list[int]) -> str:
    out: list[str] = []
    done = pos = 0
    while (cue := _BEARER_CUE.search(text, pos)) is not None:
        spaces = _SPACES.match(text, cue.end())
        assert spaces is not None  # matches the empty string
        work[0] += spaces.end() - pos
        m = _BEARER_TOKEN.match(text, spaces.end()) if spaces.end() > cue.end() else None
        if m is None:
            pos = cue.end()  # "bearer"/"basic" cannot start inside either word
            continue
        work[0] += m.end() - spaces.end()
        out += [text[done:cue.end()], " ", REDACTED]
        done = pos = m.end()
    work[0] += len(text) - pos
    out.append(text[done:])
    return "".join(out)


def _params(text: str, work: list[int]) -> str:
    out: list[str] = []
    done = pos = 0
    rev = text[::-1]
    n = len(text)
    while (cue := _PARAM_CUE.search(text, pos)) is not None:
        work[0] += cue.end() - pos
        end = cue.end()  # where the word, and the name's run of [a-z0-9_-], ends
        pos = end
        run = _NAME_RUN.match(rev, n - end)
        assert run is not None  # the cue's word ends in one of its characters
        start = max(end - (run.end() - run.start()), done)
        work[0] += end - start
        name_start = _leftmost_name(text, rev, start, end, work)
        if name_start is None:
            continue
        m = _SEP_VALUE.match(text, end)
        if m is None:
            continue
        work[0] += m.end() - end
        if m.group("value") == REDACTED:
            out.append(text[done:m.end()])
        else:
            out += [text[done:m.start("value")], REDACTED]
        done = pos = m.end()
    work[0] += len(text) - pos
    out.append(text[done:])
    return "".join(out)


def _leftmost_name(text: str, rev: str, start: int, end: int, work: list[int]) -> int | None:
    """Where a credential name ending at ``end`` begins, as the pattern
    ``\\b(?:[a-z0-9]+[_-])*(?:WORDS)`` would find it first (its leftmost start in the run
    ``text[start:end]``), or None when the run does not end in such a name."""
    best: int | None = None
    n = len(text)
    for length in _WORD_LENGTHS:
        word = end - length
        if word < start or _WORD.fullmatch(text, word, end) is None:
            continue
        work[0] += length
        chain = _CHAIN.match(rev, n - word)  # back over whole "seg_" / "seg-" segments
        first = word - (chain.end() - chain.start()) if chain else word
        first = max(first, start)
        work[0] += word - first
        if _BOUNDARY.match(text, first):
            found = first
        else:  # inside a chain a word boundary follows only a "-"
            dash = text.find("-", first, word)
            found = dash + 1 if dash >= 0 else None
        if found is not None and (best is None or found < best):
            best = found
    return best


def redact(value: Any) -> Any:
    """A copy of ``value`` with credential-looking keys replaced by ``***`` and every string
    scrubbed by ``redact_text``."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and _secret_name(k) and v else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):  # an argv: ``--api-key VALUE`` loses VALUE
        return [REDACTED if i and isinstance(v, str) and _is_secret_flag(value[i - 1])
                else redact(v) for i, v in enumerate(value)]
    if isinstance(value, str):
        return redact_text(value)
    return value


def _secret_name(key: str) -> bool:
    return bool(_SECRET_KEY.search(key) or _SECRET_ENV.match(key))


def _is_secret_flag(item: Any) -> bool:
    return isinstance(item, str) and len(item) <= 64 and bool(_SECRET_FLAG.match(item))
