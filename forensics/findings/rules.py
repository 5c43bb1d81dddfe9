"""The findings' rules that several queries read, each written once as a SQL macro (made by the
findings stage's first step through forensics.db.define_macros; db lists every home of a macro):

- cross_account (spec section 7): whether a pair's two accounts differ, as text: 'true' (a
  cross-tenant disclosure), 'false' (the recipient's own account: it may still matter between end
  users of one account, and is named apart), 'unknown' (either account missing or empty). Read by
  exposures, possible_sources, accounts, content_matches and the report's notifications.
- possible_pair: the rule of possible sources (read by the view possible_sources, by
  possible_modelled and by forensics.findings.possible): a source stays possible for a response
  unless the node's own clock proves it gone: it entered the scheduler after the response's decode
  finished, or a start-up of the node emptied the pool after its last line and no later than the
  response's start. An unknown time proves nothing.
- source_key: a source request as the findings count it: its request id, or where no gateway record
  names its room (LiteLLM logs a failure under its own call id; the time join found no single room),
  'room:<room>': a source whose request and account are unknown is counted, by its room, never dropped
  (accounts.csv's row with an empty account, the headline's bounds). Read by account_requests, the
  report's totals and its account annex.
"""

from __future__ import annotations

import duckdb

from forensics.db import define_macros
from forensics.engines import SIGNATURE_ENGINES
from forensics.engines.sglang_startup import NAME as SGLANG

MACROS = {
    "cross_account(recipient_account, source_account)": """
    CASE WHEN coalesce(recipient_account, '') = '' OR coalesce(source_account, '') = '' THEN 'unknown'
         WHEN recipient_account = source_account THEN 'false' ELSE 'true' END""",
    "possible_pair(source_started, source_gone_at, recipient_started, recipient_finished)": """
    NOT coalesce(source_started > recipient_finished, false)
    AND NOT coalesce(source_gone_at <= recipient_started, false)""",
    "source_key(request_id, room)": "coalesce(nullif(request_id, ''), 'room:' || room)",
    # a node whose engine is unknown is read as SGLang's (forensics.ingest.startup.node_engines)
    "logs_decide(engine)": f"coalesce(engine, '{SGLANG}') IN (" + ", ".join(f"'{n}'" for n in SIGNATURE_ENGINES) + ")",
}


def define_rules(con: duckdb.DuckDBPyConnection) -> None:
    """The macros above, on `con` (in the database itself: the view possible_sources reads one)."""
    define_macros(con, MACROS)
