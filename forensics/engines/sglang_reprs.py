"""Reading the Python reprs SGLang's --log-requests text lines print (`Receive: obj=GenerateReqInput(..)`,
`Finish: obj=..., out={..}`): managers/tokenizer_manager (0.4.9, 0.5.4) and utils/request_logger
(0.5.11, 0.5.23) render the request with `dataclass_to_string_truncated`, which at level 2 cuts a long
string or list to its two ends joined by ` ... `."""

from __future__ import annotations

import ast
import re
from typing import Any

# --- reading the Python reprs of --log-requests lines ---
# A prompt's text is a repr: its quotes, brackets, `rid=` or `bootstrap_room=` are inside one string
# literal, so a field is only what stands at the top level of the dataclass.
CLOSERS = {"(": ")", "[": "]", "{": "}"}
_SPECIAL = re.compile(r"['\"()\[\]{},]")
_STRING = {q: re.compile(rf"{q}(?:[^{q}\\]|\\.)*{q}", re.S) for q in "'\""}
_FIELD = re.compile(r"\s*(?P<name>\w+)=")
_INT_LIST = re.compile(r"\[\s*(?:-?\d+\s*(?:,\s*-?\d+\s*)*)?\]")
TRUNCATION = " ... "


def _string_end(s: str, i: int) -> int:
    """The index after the string literal whose quote is s[i]."""
    m = _STRING[s[i]].match(s, i)
    if m is None:
        raise ValueError("a quoted string is not closed")
    return m.end()


def _value_end(s: str, i: int) -> int:
    """Where the value starting at s[i] ends: the first comma or closing bracket outside its brackets
    and string literals (or the end of s)."""
    pending: list[str] = []
    while m := _SPECIAL.search(s, i):
        c, i = m.group(), m.start()
        if c in "'\"":
            i = _string_end(s, i)
            continue
        if c in CLOSERS:
            pending.append(CLOSERS[c])
        elif c != "," or not pending:
            if not pending:
                return i
            if pending.pop() != c:
                raise ValueError("brackets do not match")
        i += 1
    if pending:
        raise ValueError("a bracket is not closed")
    return len(s)


# the end of one repr'd value: vLLM's request lines (forensics.engines.vllm.fields) read theirs with it
value_end = _value_end


def read_fields(s: str, i: int, keyed: bool = False) -> tuple[dict[str, str], int]:
    """The top-level items from s[i] up to the closing bracket (or the end of s): `name=value` fields of
    a dataclass repr, or `'key': value` items of a dict repr when keyed; each as its value's text (a
    repeated name keeps its last value). Returns them and the index of the closing bracket."""
    out: dict[str, str] = {}
    while i < len(s) and s[i] not in ")]}":
        if keyed:
            if s[i] not in "'\"":
                raise ValueError("a dict key is not a string")
            start, key_end = i, _string_end(s, i)
            name = str(py_value(s[start:key_end]))
            if not s.startswith(": ", key_end):
                raise ValueError("a dict key is not followed by ': '")
            v = key_end + 2
        else:
            f = _FIELD.match(s, i)
            if f is None:
                raise ValueError(f"expected name=value at: {s[i : i + 30]}")
            name, v = f["name"], f.end()
        i = _value_end(s, v)
        out[name] = s[v:i]
        if s.startswith(", ", i):
            i += 2
        elif i < len(s) and s[i] not in ")]}":
            raise ValueError("fields are not separated by ', '")
    return out, i


def _cut_at(text: str) -> int | None:
    """Where a top-level ` ... ` joins the two ends of a truncated string or list, if it does."""
    depth, i = 0, 0
    while m := _SPECIAL.search(text, i):
        if depth == 0 and (cut := text.find(TRUNCATION, i, m.start())) >= 0:
            return cut
        c, i = m.group(), m.start()
        if c in "'\"":
            i = _string_end(text, i)
            continue
        depth += 1 if c in CLOSERS else -1 if c in ")]}" else 0
        i += 1
    cut = text.find(TRUNCATION, i) if depth == 0 else -1
    return cut if cut >= 0 else None


def py_value(text: str) -> Any:
    """A value of a repr as Python data. A truncated string or list (`A ... B`) is read the way the JSON
    request log writes it (`A...B`, `[*A, '...', *B]`), so the text and JSON logs give the same detail."""
    text = text.strip()
    if (cut := _cut_at(text)) is not None:
        a, b = py_value(text[:cut]), py_value(text[cut + len(TRUNCATION) :])
        if isinstance(a, str) and isinstance(b, str):
            return a + "..." + b
        if isinstance(a, list) and isinstance(b, list):
            return [*a, "...", *b]
        raise ValueError(f"a truncated value joins unlike ends: {text[:40]}")
    if text.startswith("{"):
        items, end = read_fields(text, 1, keyed=True)
        if text[end:] != "}":
            raise ValueError(f"a dict does not end where it closes: {text[:40]}")
        return {k: py_value(v) for k, v in items.items()}
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as err:
        raise ValueError(f"not a Python literal: {text[:40]}") from err


def int_list_len(text: str) -> int | None:
    """How many ints a repr'd flat list of ints holds (input_ids), without building it; None when the
    text is anything else (skipped, truncated, a batch's list of lists)."""
    if not _INT_LIST.fullmatch(text.strip()):
        return None
    return text.count(",") + 1 if any(c.isdigit() for c in text) else 0
