"""cross_account per pair (spec section 7): exposures.csv and possible_sources.csv say whether the two
accounts differ, against the accounts the simulator gave each request (its truth), on the bundled sample;
and the macro's three answers."""

from __future__ import annotations

import csv
from collections import Counter

from forensics.db import connect
from forensics.findings.rules import define_rules
from tests import support


def test_the_macro_says_true_false_or_unknown() -> None:
    con = connect(":memory:")
    define_rules(con)
    got = con.execute("""SELECT cross_account('a', 'b'), cross_account('a', 'a'), cross_account(NULL, 'a'),
        cross_account('a', ''), cross_account(NULL, NULL)""").fetchone()
    assert got == ("true", "false", "unknown", "unknown", "unknown")


def test_each_pair_of_the_sample_against_the_truths_accounts(sample_out) -> None:
    truth = {
        r["request_id"]: r["account_id"]
        for r in csv.DictReader((support.SAMPLE.parent / "truth" / "responses.csv").open())
    }
    for name in ("exposures.csv", "possible_sources.csv"):
        seen: Counter[str] = Counter()
        for r in csv.DictReader((sample_out / name).open()):
            a, b = truth.get(r["recipient_request_id"]), truth.get(r["source_request_id"])
            want = "unknown" if not a or not b else str(a != b).lower()
            assert r["cross_account"] == want, (name, r["recipient_request_id"], r["source_request_id"])
            seen[want] += 1
        assert seen["true"] and seen["false"], (name, seen)  # both kinds occur: the check means something


def test_same_account_only_responses_per_account_against_the_truth(sample_out) -> None:
    """accounts.csv's responses_same_account_only: the responses every pair of which joins two requests of
    one account by the truth's accounts; the role received_same_account_only where that is all of them."""
    truth = {
        r["request_id"]: r["account_id"]
        for r in csv.DictReader((support.SAMPLE.parent / "truth" / "responses.csv").open())
    }
    pairs: dict[str, set[bool]] = {}
    for r in csv.DictReader((sample_out / "exposures.csv").open()):
        pairs.setdefault(r["recipient_request_id"], set()).add(
            truth[r["recipient_request_id"]] == truth.get(r["source_request_id"])
        )
    want: Counter[str] = Counter(truth[rid] for rid, same in pairs.items() if same == {True})
    rows = {r["account_id"]: r for r in csv.DictReader((sample_out / "accounts.csv").open())}
    got = {a: int(r["responses_same_account_only"]) for a, r in rows.items() if int(r["responses_same_account_only"])}
    assert got == dict(want) and got
    for a, r in rows.items():
        only = int(r["responses_affected"]) > 0 and int(r["responses_affected"]) == int(
            r["responses_same_account_only"]
        )
        assert ("received_same_account_only" in r["roles"].split(";")) == only, a
