"""The notice templates are compiled once per process (forensics.report.notices._COMPILED, keyed by each
template's file and text): an unchanged template is not compiled again, and an edited one is, even when
its time stamp did not change (an edit within the file system's clock tick); a template it includes is
read again when that file changes."""

from __future__ import annotations

import os
from pathlib import Path

from forensics.report.notices import DEFAULT_TEMPLATES, compiled_templates


def _render(template: Path) -> str:
    ((compiled, _ext),) = compiled_templates([template])
    return compiled.render(name="x")


def test_an_unchanged_template_is_compiled_once() -> None:
    first = compiled_templates(DEFAULT_TEMPLATES)
    again = compiled_templates(DEFAULT_TEMPLATES)
    assert [t for t, _ in first] == [t for t, _ in again]  # the same compiled objects
    assert [e for _, e in first] == [".html", ".txt"]


def test_an_edited_template_is_compiled_anew_whatever_its_time_stamp(tmp_path: Path) -> None:
    t = tmp_path / "letter.txt.j2"
    t.write_text("first {{ name }}\n")
    stamp = t.stat()
    assert _render(t) == "first x\n"
    t.write_text("second {{ name }}\n")
    os.utime(t, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # the same time stamp: only the text tells
    assert _render(t) == "second x\n"
    t.write_text("first {{ name }}\n")  # back to the first text: its compiled template again
    assert _render(t) == "first x\n"


def test_an_edited_include_is_read_again(tmp_path: Path) -> None:
    t, part = tmp_path / "letter.txt.j2", tmp_path / "part.txt"
    t.write_text('{% include "part.txt" %}\n')
    part.write_text("old {{ name }}")
    assert _render(t) == "old x"  # trim_blocks: the newline after a tag goes
    stamp = part.stat().st_mtime_ns
    part.write_text("new {{ name }}")
    os.utime(part, ns=(stamp + 1_000_000_000, stamp + 1_000_000_000))  # a later time stamp, as an edit has
    assert _render(t) == "new x"
