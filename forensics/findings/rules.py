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
"""

from __future__ import annotations

import duckdb

from forensics.db import define_macros

MACROS = {
    "cross_account(recipient_account, source_account)": """
    CASE WHEN coalesce(recipient_account, '') = '' OR coalesce(source_account, '') = '' THEN 'unknown'
         WHEN recipient_account = source_account THEN 'false' ELSE 'true' END""",
    "possible_pair(source_started, source_gone_at, recipient_started, recipient_finished)": """
    NOT coalesce(source_started > recipient_finished, false)
    AND NOT coalesce(source_gone_at <= recipient_started, false)""",
}


def define_rules(con: duckdb.DuckDBPyConnection) -> None:
    """The macros above, on `con` (in the database itself: the view possible_sources reads one)."""
    define_macros(con, MACROS)
