"""Compare the analysis of a simulated bundle with the simulator's ground truth (computed independently)."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.analysis import Findings


@dataclass
class Comparison:
    missed: list[str] = field(default_factory=list)  # truly exposed, not reported
    false_confirmed: list[str] = field(default_factory=list)  # confirmed, not truly exposed
    bad_indeterminate: list[str] = field(default_factory=list)  # indeterminate where truth decides "clean"
    pair_precision: float = 1.0
    pair_recall: float = 1.0
    slot_mismatches: list[tuple] = field(default_factory=list)
    truth_pairs: int = 0
    found_pairs: int = 0
    # responses without page evidence (a decode node without telemetry)
    signature_not_confirmed: list[str] = field(default_factory=list)  # complete signature, not confirmed
    possible_pair_recall: float = 1.0  # true (recipient, source) pairs among the possible sources
    possible_account_recall: float = 1.0  # true source accounts among the possible sources' accounts
    possible_pairs: int = 0
    dark_truth_pairs: int = 0
    # the likely subset (is_likely: printed, likelihood >= 0.5) against the true pairs, and the sum of the likelihoods
    likely_pairs: int = 0
    likely_precision: float = 1.0
    likely_recall: float = 1.0
    likelihood_sum: float = 0.0
    likelihood_missing: int = 0  # possible pairs without a likelihood (the model replayed not both rooms)
    likely_printed: bool = False  # the tool's own verdict: its likely subset measured good enough to print
    tool_precision: float | None = None  # ... and the precision it measured on the calibration nodes


def _read(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def compare(sim_out: Path) -> Comparison:
    truth = {r["request_id"]: r for r in _read(sim_out / "truth" / "responses.csv")}
    tpairs = {
        (r["recipient_request_id"], r["source_request_id"], r["node"], r["kind"]): int(r["slots"])
        for r in _read(sim_out / "truth" / "exposures.csv")
    }
    f = Findings(sim_out / "bundle")
    affected = {r[0]: r[1] for r in f.rows("SELECT request_id, status FROM affected_responses")}
    evidence = {r[0]: r[1] for r in f.rows("SELECT request_id, evidence FROM affected_responses")}
    found = {
        (r[0], r[1], r[2], r[3]): (r[4], r[5], r[6])
        for r in f.rows(
            "SELECT recipient_request_id, source_request_id, node, kind, slots, status, slots_confirmed FROM exposures"
        )
    }
    c = Comparison(truth_pairs=len(tpairs), found_pairs=len(found))
    for rid, t in truth.items():
        status = affected.get(rid)
        if t["exposed"] == "1" and status is None:
            c.missed.append(rid)
        # a complete signature is confirmed only where the logs show its pages written over (spec
        # section 7): never where the truth finds them holding nobody else's KV; and a signature whose
        # pages held nobody's KV may stay indeterminate (the logs cannot clear it)
        signature = t["evidence"] == "signature" and t["placeholder"] == "1"
        if status == "confirmed" and t["exposed"] != "1":
            c.false_confirmed.append(rid)
        if signature and t["status"].startswith("2") and t["exposed"] == "1" and status != "confirmed":
            c.signature_not_confirmed.append(rid)
        doubt = t["allowed_indeterminate"] == "1" or (signature and evidence.get(rid) == "signature")
        if status == "indeterminate" and t["exposed"] != "1" and not doubt:
            c.bad_indeterminate.append(rid)
    # pairs on telemetry evidence: truth pairs of signature responses cannot be seen in pages
    sig = {rid for rid, t in truth.items() if t["evidence"] == "signature"}
    tp = {k: v for k, v in tpairs.items() if k[0] not in sig}
    hit = set(tp) & set(found)
    c.pair_recall = len(hit) / len(tp) if tp else 1.0
    # precision of claims: confirmed pairs, and indeterminate pairs where the truth does not allow doubt
    claims = {
        k
        for k, (_, status, _) in found.items()
        if status == "confirmed" or truth.get(k[0], {}).get("allowed_indeterminate") != "1"
    }
    c.pair_precision = len(claims & set(tp)) / len(claims) if claims else 1.0

    # slots: exact where the truth allows no doubt; else the truth lies between the slots the analysis
    # confirms and those it reports as possible
    def off(k: tuple) -> bool:
        slots, _, sure = found[k]
        if truth.get(k[0], {}).get("allowed_indeterminate") == "1":
            return not sure <= tp[k] <= slots
        return tp[k] != slots

    c.slot_mismatches = [(k, tp[k], found[k][0], found[k][2]) for k in sorted(hit) if off(k)]

    # possible sources: every true pair of a response without page evidence, and every true source account
    rows = f.rows("SELECT recipient_request_id, source_request_id, likelihood FROM possible_sources")
    possible = {(r, s) for r, s, _ in rows}
    dark = {(k[0], k[1]) for k in tpairs if k[0] in sig}
    c.possible_pairs, c.dark_truth_pairs = len(possible), len(dark)
    c.possible_pair_recall = len(dark & possible) / len(dark) if dark else 1.0
    account = {rid: t["account_id"] for rid, t in truth.items()}
    true_accounts = {account.get(src) for _, src in dark}
    found_accounts = {account.get(src) for _, src in possible}
    c.possible_account_recall = len(true_accounts & found_accounts) / len(true_accounts) if true_accounts else 1.0
    likely = set(
        f.rows("SELECT recipient_request_id, source_request_id FROM possible_sources WHERE is_likely(likelihood)")
    )
    c.likely_printed, c.tool_precision = f.rows("SELECT likely_printed, measured_precision FROM source_tier")[0]
    c.likely_pairs = len(likely)
    c.likely_precision = len(likely & dark) / len(likely) if likely else 1.0
    c.likely_recall = len(likely & dark) / len(dark) if dark else 1.0
    c.likelihood_sum = sum(lik for _, _, lik in rows if lik is not None)
    c.likelihood_missing = sum(lik is None for _, _, lik in rows)
    return c


@dataclass
class Coverage:
    """What damaged evidence must not lose: truly exposed responses in no row of affected_responses (found
    by request id, else by room: a response whose gateway record is lost is keyed by its engine rid), and
    true (recipient, source) pairs of an indeterminate recipient in neither exposures nor possible_sources
    (each side found by request id or by room)."""

    missed: list[str] = field(default_factory=list)
    unlisted_pairs: list[tuple[str, str]] = field(default_factory=list)
    indeterminate_pairs: int = 0  # true pairs of indeterminate recipients: the bound's test cases


def coverage(truth_dir: Path, f: Findings) -> Coverage:
    truth = _read(truth_dir / "responses.csv")
    room = {t["request_id"]: t["room"] for t in truth}
    aff = f.rows("SELECT request_id, room::VARCHAR, status FROM affected_responses")
    listed = {k for r, rm, _ in aff for k in (r, f"room:{rm}")}
    c = Coverage()
    c.missed = sorted(
        t["request_id"]
        for t in truth
        if t["exposed"] == "1" and t["request_id"] not in listed and f"room:{t['room']}" not in listed
    )
    indeterminate = {k for r, rm, s in aff if s == "indeterminate" for k in (r, f"room:{rm}")}
    pairs = set()
    for a, ra, b, rb in f.rows("""SELECT recipient_request_id, recipient_room::VARCHAR, source_request_id,
            source_room::VARCHAR FROM exposures UNION ALL SELECT recipient_request_id, recipient_room::VARCHAR,
            source_request_id, source_room::VARCHAR FROM possible_sources"""):
        pairs |= {(x, y) for x in (a, f"room:{ra}") for y in (b, f"room:{rb}") if x and y}
    for p in _read(truth_dir / "exposures.csv"):
        r, s = p["recipient_request_id"], p["source_request_id"]
        rk, sk = (r, f"room:{room.get(r)}"), (s, f"room:{room.get(s)}")
        if not any(k in indeterminate for k in rk):
            continue
        c.indeterminate_pairs += 1
        if not any((x, y) in pairs for x in rk for y in sk):
            c.unlisted_pairs.append((r, s))
    return c
