"""What an input file lost, as the loader that read it found it: one Damage per loss, kept on the
InputFile (InputFile.damage) and stored by ingest in `input_damage`; the findings stage's
`evidence_damage` reads it beside the tables (forensics/findings/damage.py)."""

from __future__ import annotations

from dataclasses import dataclass

# how records_lost is known: counted (the format says), estimated (the detail says how), unknown (NULL)
LOST_BASES = ("counted", "estimated", "unknown")


@dataclass(frozen=True)
class Damage:
    """One loss of an input file. `detail` is a sentence a privacy officer can read; the byte fields
    are what a cut stream's estimate of its lost records rests on (NULL elsewhere)."""

    kind: str  # skipped_file | stream_cut | page_file_cut | unreadable | missing_field
    detail: str
    records_lost: int | None = None  # None: unknown, never 0
    lost_basis: str = "unknown"
    at_byte: int | None = None  # where in the file (compressed bytes) the stream breaks
    bytes_after: int | None = None  # compressed bytes after the break (0: the file ends there)
    bytes_read: int | None = None  # decompressed bytes read before the break
    records_read: int | None = None  # whole lines read before the break

    def __post_init__(self) -> None:
        assert self.lost_basis in LOST_BASES, self.lost_basis
        assert (self.records_lost is None) == (self.lost_basis == "unknown"), (self.records_lost, self.lost_basis)
