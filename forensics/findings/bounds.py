"""The headline's counts where the evidence bounds them (response_bounds: rows that may be one response
twice): how a count and its least value are written, in one place for the command's summary, the report,
the brief and the annexes, and the split by status written the same way, so that it counts what the range
counts (distinct responses), never rows."""

from __future__ import annotations


def ranged(least: int | None, most: int | None, grouped: bool = True) -> str:
    """A count the evidence bounds: "least to most" where they differ, else the count. `grouped`: thousands
    separated (the report's figures); the command's summary prints them plain."""
    hi = most or 0
    lo = hi if least is None else min(least, hi)
    fmt = "{:,}" if grouped else "{}"
    return f"{fmt.format(lo)} to {fmt.format(hi)}" if lo < hi else fmt.format(hi)


def split(
    confirmed: tuple[int | None, int | None], indeterminate: tuple[int | None, int | None], grouped: bool = True
) -> str:
    """The split by status of a ranged count, each part (least, most) ranged too: "11 confirmed, 1 to 2
    indeterminate"."""
    return f"{ranged(*confirmed, grouped=grouped)} confirmed, {ranged(*indeterminate, grouped=grouped)} indeterminate"
