"""Cohort labelling (forensics.cohorts) and the `forensics cohorts` preview (forensics.cli.cohorts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from forensics.cli import app
from forensics.cli.cohorts import as_text
from forensics.cohorts import load_exclusions
from forensics.errors import InputError
from forensics.pipeline import preview_cohorts as preview
from tests.support.bundlekit import gw, write_jsonl

REQUESTS = [
    gw("r-acct", 1, account="acct-int"),
    gw("r-tok", 2, api_token_id="tok-bench"),
    gw("r-v4", 3, client_ip="198.51.100.77"),
    gw("r-v6", 4, client_ip="2001:db8:1::5"),
    gw("r-ua", 5, user_agent="sglang-bench/0.3"),
    gw("r-ua-case", 6, user_agent="SGLANG-BENCH/0.3"),
    gw("r-hdr", 7, headers={"x-internal-test": "1"}),
    gw("r-hdr-0", 8, headers={"x-internal-test": "0"}),
    gw("r-model", 9, model="canary-7b"),
    gw("r-early", 10, account="acct-res", ts="2026-09-09T11:59:59Z"),
    gw("r-in", 11, account="acct-res", ts="2026-09-09T12:00:00Z"),
    gw("r-late", 12, account="acct-res", ts="2026-09-09T16:00:00Z"),
    gw("r-plain", 13, client_ip="203.0.113.9"),
    gw("r-both", 14, account="acct-int", client_ip="198.51.100.1"),
]

RULES = """
[[cohort]]
name = "internal-test"
kind = "internal"
[[cohort.match]]
accounts = ["acct-int"]
[[cohort.match]]
api_tokens = "tok-bench"
[[cohort.match]]
user_agents = ["sglang-bench/*"]
[[cohort.match]]
headers = { "x-internal-test" = "1" }
[[cohort.match]]
models = ["canary-*", "canary-7b"]

[[cohort]]
name = "researcher"
kind = "researcher"
[[cohort.match]]
accounts = ["acct-res"]
after = "2026-09-09T12:00:00Z"
before = "2026-09-09T16:00:00Z"
[[cohort.match]]
client_cidrs = ["198.51.100.0/24", "2001:db8:1::/48"]
"""
ONE_RULE = '[[cohort]]\nname = "t"\nkind = "other"\n[[cohort.match]]\naccounts = "acct-int"\n'


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "b" / "gateway" / "gateway.jsonl", REQUESTS)
    (tmp_path / "b" / "exclusions.toml").write_text(RULES)
    return tmp_path / "b"


def test_every_key_matches_and_first_match_wins(bundle: Path) -> None:
    result = preview(bundle)
    rules = {r["label"]: r for r in result["rules"]}
    assert rules["internal-test#1"]["sample_matched"] == ["r-acct", "r-both"]
    assert rules["internal-test#2"]["sample_matched"] == ["r-tok"]
    assert rules["internal-test#3"]["sample_matched"] == ["r-ua"]  # globs are case-sensitive
    assert rules["internal-test#4"]["sample_matched"] == ["r-hdr"]
    assert rules["internal-test#5"]["sample_matched"] == ["r-model"]  # exact list element, not a glob
    assert rules["researcher#1"]["sample_matched"] == ["r-in"]  # after inclusive, before exclusive
    assert rules["researcher#2"]["sample_matched"] == ["r-both", "r-v4", "r-v6"]  # IPv4 and IPv6
    # r-both matches internal-test#1 and researcher#2: the first cohort in file order wins
    assert rules["researcher#2"]["matched"] == 3 and rules["researcher#2"]["won"] == 2
    assert "r-both" in rules["internal-test#1"]["sample_won"]
    counts = {c["cohort"]: c["requests"] for c in result["cohorts"]}
    assert counts == {"customer": 5, "internal-test": 6, "researcher": 3}
    assert result["requests_before"] == 14 and result["requests_after"] == 5


def test_no_exclusions_everything_is_customer(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "b" / "gateway" / "g.jsonl", REQUESTS[:3])
    result = preview(tmp_path / "b")
    assert result["rules"] == [] and result["cohorts"][0]["cohort"] == "customer"
    assert result["requests_after"] == 3 and "none" in as_text(result)


def test_samples_capped_at_five_and_sorted(tmp_path: Path) -> None:
    requests = [gw(f"q{i:02d}", i, account="acct-int") for i in range(9, 0, -1)]
    write_jsonl(tmp_path / "b" / "gateway" / "g.jsonl", requests)
    (tmp_path / "x.toml").write_text(ONE_RULE)
    result = preview(tmp_path / "b", tmp_path / "x.toml")
    assert result["rules"][0]["sample_matched"] == ["q01", "q02", "q03", "q04", "q05"]
    assert result["rules"][0]["matched"] == 9


@pytest.mark.parametrize(
    "body, needle",
    [
        ('[[cohort.match]]\nclients = ["x"]\n', "'clients'"),
        ('[[cohort.match]]\nclient_cidrs = ["198.51.100.0/33"]\n', "198.51.100.0/33"),
        ('[[cohort.match]]\nclient_cidrs = ["not-a-net"]\n', "not-a-net"),
        ('[[cohort.match]]\nafter = "2026-09-09T12:00:00"\n', "time zone"),
        ('colour = "red"\n[[cohort.match]]\naccounts = ["a"]\n', "'colour'"),
    ],
)
def test_bad_rules_rejected_with_the_key_named(tmp_path: Path, body: str, needle: str) -> None:
    path = tmp_path / "x.toml"
    path.write_text('[[cohort]]\nname = "t"\nkind = "internal"\n' + body)
    with pytest.raises(InputError) as err:
        load_exclusions(path)
    assert needle in str(err.value)


def test_cli_json_and_table(bundle: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["cohorts", str(bundle), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["requests_before"] == 14
    res = runner.invoke(app, ["cohorts", str(bundle)])
    assert res.exit_code == 0 and "researcher#2" in res.output and "r-v6" in res.output


def test_hostile_request_id_does_not_reach_terminal_raw(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "b" / "gateway" / "g.jsonl", [gw("evil\x1b[2Jid", 1, account="acct-int")])
    (tmp_path / "x.toml").write_text(ONE_RULE)
    text = as_text(preview(tmp_path / "b", tmp_path / "x.toml"))
    assert "\x1b" not in text and "evil?[2Jid" in text


TENANT_RULES = """
[[cohort]]
name = "ci"
kind = "internal"
[[cohort.match]]
tags = ["test"]
[[cohort.match]]
key_aliases = ["ci-smoke"]
[[cohort]]
name = "team-a"
kind = "other"
[[cohort.match]]
teams = ["team-a"]
[[cohort]]
name = "bob"
kind = "researcher"
[[cohort.match]]
users = ["user-bob"]
"""


@pytest.mark.parametrize("fixture", ["litellm_spendlogs.csv", "litellm_payload.jsonl"])
def test_rules_over_the_tenant_layer(tmp_path: Path, fixture: str) -> None:
    """teams (id or alias), key aliases, users and tags of a LiteLLM log, with the same before/after
    accounting; the expected cohort of each record follows from the fixture's expected attributes."""
    src = Path(__file__).parent.parent / "fixtures" / "gateway"
    (tmp_path / "b" / "gateway").mkdir(parents=True)
    (tmp_path / "b" / "gateway" / fixture).write_bytes((src / fixture).read_bytes())
    (tmp_path / "b" / "exclusions.toml").write_text(TENANT_RULES)
    result = preview(tmp_path / "b")
    want: dict[str, int] = {}
    for rec in json.loads((src / "expected.json").read_text())[fixture]:
        a = rec["attrs"]
        cohort = (
            "ci" if "test" in a.get("tags", []) or a.get("key_alias") == "ci-smoke"
            else "team-a" if "team-a" in (a.get("team"), a.get("team_alias"))
            else "bob" if a.get("user") == "user-bob"
            else "customer"
        )  # fmt: skip
        want[cohort] = want.get(cohort, 0) + 1
    assert len(want) >= 3  # the fixture exercises several rules
    assert {c["cohort"]: c["requests"] for c in result["cohorts"]} == want
    assert result["requests_before"] == sum(want.values())
    assert result["requests_after"] == want.get("customer", 0)


def test_rules_on_client_sent_fields_alone_warn(bundle: Path) -> None:
    warnings = {w["rule"]: w for w in preview(bundle)["warnings"]}
    # the user agent and the header rule move acct-x's requests (a customer account: no rule names it);
    # the account, token and model rules name no field a client sends
    assert set(warnings) == {"internal-test#3", "internal-test#4"}
    assert warnings["internal-test#3"]["fields"] == ["user_agent"]
    assert warnings["internal-test#4"]["fields"] == ["headers.x-internal-test"]
    assert (warnings["internal-test#4"]["requests"], warnings["internal-test#4"]["sample_accounts"]) == (1, ["acct-x"])
    assert "internal-test#4 matches headers.x-internal-test" in warnings["internal-test#4"]["message"]


def test_no_warning_where_an_account_rule_names_the_sender(tmp_path: Path) -> None:
    # the header rule comes first and wins, but acct-int is internal by the account rule anyway; a rule
    # that pins the account besides the header is matched by no stranger
    write_jsonl(
        tmp_path / "b" / "gateway" / "g.jsonl",
        [gw(f"q{i}", i, account="acct-int", headers={"x-internal-test": "1"}) for i in range(1, 4)],
    )
    (tmp_path / "x.toml").write_text(
        '[[cohort]]\nname = "t"\nkind = "internal"\n'
        '[[cohort.match]]\nheaders = { "x-internal-test" = "1" }\n'
        '[[cohort.match]]\naccounts = ["acct-int"]\n'
        '[[cohort.match]]\naccounts = ["acct-int"]\nuser_agents = ["curl/*"]\n'
    )
    result = preview(tmp_path / "b", tmp_path / "x.toml")
    assert result["rules"][0]["won"] == 3
    assert result["warnings"] == []


def test_sample_rules_print_plainly_and_warn_on_client_fields() -> None:
    sample = Path(__file__).resolve().parents[2] / "sample_data" / "bundle"
    res = CliRunner().invoke(app, ["cohorts", str(sample), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    found = {w["rule"]: (w["fields"], w["requests"], w["sample_accounts"]) for w in data["warnings"]}
    # acct-5e0c77 sends x-internal-test: 1 and no rule names it: a customer labelled internal by a header
    assert found == {
        "internal-test#2": (["headers.x-internal-test"], 84, ["acct-5e0c77"]),
        "internal-test#3": (["user_agent"], 64, ["acct-int-perf"]),  # won 64 of the 236 it matches
    }
    assert "Warning: rule internal-test#2 matches headers.x-internal-test" in res.stderr
    text = CliRunner().invoke(app, ["cohorts", str(sample)]).stdout
    assert "client_cidrs=192.0.2.77/32" in text and "headers.x-internal-test=1" in text
    assert "accounts=acct-3c9e1f, acct-b71d02" in text
    assert "IPv4Network" not in text and "[" not in text
