"""marker_scores' search over the joined texts against its definition: per engine, the texts holding
one of its markers, each counted once, markers cut and glued across texts and repeated in one."""

from __future__ import annotations

import random

from forensics.engines import ENGINES, marker_scores


def _by_definition(texts: list[str]) -> dict[str, int]:
    return {name: sum(any(m in t for m in e.markers) for t in texts) for name, e in ENGINES.items()}


def test_scores_match_the_definition() -> None:
    rng = random.Random(7)
    markers = [m for e in ENGINES.values() for m in e.markers]
    for _ in range(300):
        texts = []
        for _ in range(rng.randrange(0, 12)):
            pieces = []
            for _ in range(rng.randrange(0, 4)):
                m = rng.choice(markers)
                cut = rng.randrange(0, len(m) + 1)
                pieces.append(rng.choice([m, m[:cut], m[cut:], "x\0", " ", "é"]))
            texts.append("".join(pieces))
        assert marker_scores(texts) == _by_definition(texts)
        assert marker_scores(iter(texts)) == _by_definition(texts)
