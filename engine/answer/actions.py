"""What a person could act on in a text: web and mail addresses, phone numbers, shell commands.

    actions("Get it from http://evil.example/fw.exe or call +1 800 555 0199.")
        # ['http://evil.example/fw.exe', '+1 800 555 0199']
    missing_actions(sentence, [p.text for p in passages])   # the ones no passage holds verbatim

An answer may pass on such a thing only when a passage holds it word for word (a manual may
really say "run this"): a model that makes one up, or copies a planted instruction from
somewhere it was not given, must not send a person to it. Found as written:
    URLs      with a scheme (http://, ftp://, file://...), "www." or "mailto:"; javascript:/data:
    e-mail    name@host.tld
    phones    "+" and 7-15 digits, "(800) 555-0199", "800-555-0199"; or digit groups beside
              "phone", "call", "tel", "fax", "hotline"
    commands  the lines of a shell code block (```sh, bash, console, powershell, cmd), a line
              after a "$ " prompt, and code (backticked or in a block) that starts with a program
              that fetches, runs, deletes or takes privileges (curl, sudo, rm, powershell...)
Compared with the passages: URLs and e-mail as written (trailing punctuation aside), phone
numbers by their digits, commands with their spaces collapsed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_URL = re.compile(r"(?:\b[a-z][a-z0-9+.-]{1,15}://|\bwww\.|\bmailto:|\bjavascript:|\bdata:[a-z]+/)"
                  r"[^\s<>\"'`\[\](){}]*", re.IGNORECASE)
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_PHONE_SHAPED = re.compile(r"(?<![\w+])(?:\+\d[\d ()-]{5,}\d|\(\d{2,5}\)[ -]?\d[\d -]{4,}\d|\d{3}-\d{3}-\d{4})(?![\w])")
_DIGIT_GROUPS = re.compile(r"(?<![\w.])(?<!\d[ -])\d{2,5}(?:[ -]\d{2,5}){2,3}(?!\w|[.,]\d|[ -]\d)")
_PHONE_WORDS = re.compile(r"\b(?:phone|telephone|call|tel|fax|hotline|helpline|dial)\b", re.IGNORECASE)
_TRAILING = ".,;:!?'\")]}>*"
_SHELL_FENCE = re.compile(r"^\s*(?:```|~~~)\s*(?:sh|bash|zsh|shell|console|terminal|powershell|ps1|pwsh|"
                          r"cmd|bat|batch)\b", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_PROMPT = re.compile(r"^\s*(?:\$|PS [^>]*>|[A-Z]:\\[^>]*>)\s+(?=\S)")
_BACKTICKED = re.compile(r"`([^`\n]+)`")
# Programs whose line is worth checking wherever it appears: they fetch, run, delete, or take
# privileges. A manual's own tools (R, gnuplot, lilypond) are left to the code-name check.
RISKY_PROGRAMS = frozenset("""
sudo su doas curl wget fetch sh bash zsh dash ksh fish powershell pwsh cmd iex iwr irm
invoke-webrequest invoke-expression invoke-restmethod start-process rm rmdir del erase format
mkfs dd chmod chown nc ncat netcat telnet ssh scp sftp ftp tftp certutil bitsadmin mshta regsvr32
rundll32 msiexec reg schtasks crontab eval exec
""".split())


def actions(text: str) -> list[str]:
    """The URLs, e-mail addresses, phone numbers and shell commands of `text`, once each, as written."""
    found = addresses(text)
    found += phones(text)
    found += commands(text)
    return list(dict.fromkeys(f for f in found if f))


def addresses(text: str) -> list[str]:
    """The web and mail addresses of `text`, as written (trailing punctuation aside), longest first."""
    found = [_clean(m.group()) for m in _URL.finditer(text)]
    found += [_clean(m.group()) for m in _EMAIL.finditer(_URL.sub(" ", text))]
    return sorted(dict.fromkeys(f for f in found if f), key=len, reverse=True)


def phones(text: str) -> list[str]:
    shaped = list(_PHONE_SHAPED.finditer(text))
    found = [m.group().strip() for m in shaped]
    if _PHONE_WORDS.search(text):
        found += [m.group() for m in _DIGIT_GROUPS.finditer(text)
                  if not any(s.start() <= m.start() < s.end() for s in shaped)]
    return [f for f in found if 7 <= len(_digits(f)) <= 15]


def commands(text: str) -> list[str]:
    """Shell command lines: in a shell code block, after a "$ " prompt, or code that starts
    with a risky program."""
    found, shell_block, in_block = [], False, False
    for line in text.split("\n"):
        if _FENCE.match(line):
            shell_block, in_block = (False, False) if in_block else (bool(_SHELL_FENCE.match(line)), True)
            continue
        prompted = _PROMPT.match(line)
        body = line[prompted.end():] if prompted else line
        if (in_block and (shell_block or prompted or _risky(body))) or (not in_block and prompted):
            found.append(body)
        elif not in_block:
            found += [span for span in _BACKTICKED.findall(line) if _risky(span)]
    return [" ".join(f.split()) for f in found if f.strip()]


def missing_actions(text: str, passages: Sequence[str], find=None) -> list[str]:
    """The actions of `text` that no passage holds verbatim; `find` (actions by default, or
    addresses) says which kinds to look for."""
    return [a for a in (find or actions)(text) if not any(holds(p, a) for p in passages)]


def holds(passage: str, action: str) -> bool:
    """Whether the passage's text holds `action` (an item actions() found) as written."""
    if _digits(action) and not re.search(r"[A-Za-z]", action):  # a phone number: by its digits
        digits = _digits(action)
        return any(_digits(p) == digits for p in phones(passage) + _digit_runs(passage))
    return " ".join(action.split()) in " ".join(passage.split())


def _risky(code: str) -> bool:
    words = code.split()
    first = words[0].casefold().rsplit("/", 1)[-1] if words else ""
    return first in RISKY_PROGRAMS or bool(re.search(r"\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b|\biex\b", code))


def _clean(found: str) -> str:
    return found.rstrip(_TRAILING)


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _digit_runs(text: str) -> list[str]:
    return [m.group() for m in re.finditer(r"\+?\d[\d ()./-]{5,}\d", text)]
