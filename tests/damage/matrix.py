"""The closing note's table of #47: damage kind x incident, with the five figures the fault-injection
suite (tests/damage/test_fault_injection.py) asserts, as counts.

    PYTHONPATH=. .venv/bin/python -m tests.damage.matrix OUT [--incidents a,b] [--kinds a,b] [--json FILE]

OUT holds the simulated incidents, the damaged copies and their outputs (reused incidents are not
simulated again). Columns: false confirmed (confirmed responses the truth calls unexposed); exposed
missing (truly exposed responses not listed, of the truth's); pairs missing (true (recipient, source)
pairs in neither exposures nor possible_sources, of the truth's); not named (where the damaged input's
path is missing: stdout, part 1; for a file never delivered, evidence_damage.csv); findings differing
(duplicates and reordering: the findings CSVs not byte-identical to the undamaged run's; "n/a" for kinds
that lose records); and the run's error when it failed, or its message when it refused soundly (the only
gateway log unusable: tests/support/faultcheck.py says when a refusal is sound; nothing is measured then).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tests.support.damage import KINDS
from tests.support.faultcheck import INCIDENTS, Figures, investigate, simulated
from tests.support.faultcheck import damaged_run as run_damaged

HEAD = ("kind", "incident", "damaged input", "false confirmed", "exposed missing", "pairs missing", "not named",
        "findings differing", "run error")  # fmt: skip


def row(incident: str, f: Figures) -> tuple[str, ...]:
    return (
        f.damage.kind,
        incident,
        f.damage.input,
        *(
            ("not measured",) * 3
            if f.refused
            else (
                str(len(f.false_confirmed)),
                f"{len(f.exposed_missing)} / {f.exposed_total}",
                f"{len(f.pairs_missing)} / {f.pairs_total}",
            )
        ),
        ", ".join(f.unnamed) or "-",
        "n/a" if f.differing is None else (", ".join(f.differing) or "0"),
        f"refused (sound): {f.refused}"[:160] if f.refused else (f.error or "-")[:60],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--incidents", default=",".join(INCIDENTS))
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--json", type=Path, help="Also write every figure, with the damage records, as JSON.")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    print("| " + " | ".join(HEAD) + " |")
    print("|" + "---|" * len(HEAD))
    records = []
    for name in a.incidents.split(","):
        sim = simulated(INCIDENTS[name], a.out / "sims")
        work = a.out / name
        clean = investigate(sim / "bundle", work / "clean-out")
        for kind in a.kinds.split(","):
            f = run_damaged(sim, kind, INCIDENTS[name].seed, work, clean)
            print("| " + " | ".join(row(name, f)) + " |", flush=True)
            records.append({"incident": name, "damage": vars(f.damage), "false_confirmed": f.false_confirmed,
                            "exposed_missing": f.exposed_missing, "exposed_total": f.exposed_total,
                            "pairs_missing": f.pairs_missing, "pairs_total": f.pairs_total, "unnamed": f.unnamed,
                            "differing": f.differing, "error": f.error, "refused": f.refused})  # fmt: skip
    if a.json:
        a.json.write_text(json.dumps(records, indent=1, default=list))


if __name__ == "__main__":
    main()
