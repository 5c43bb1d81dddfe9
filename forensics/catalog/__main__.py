"""python -m forensics.catalog INCIDENT.duckdb: print docs/schema.md from the database's comments."""

import sys

import duckdb

from forensics.catalog import schema_markdown

if len(sys.argv) != 2:
    sys.exit("usage: python -m forensics.catalog INCIDENT.duckdb")
sys.stdout.write(schema_markdown(duckdb.connect(sys.argv[1], read_only=True)))
