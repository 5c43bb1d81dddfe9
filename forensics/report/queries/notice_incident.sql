-- What every per-account notice says of the incident (its id, title, contact point, report version,
-- dates, the advice bundle.toml gives), as one JSON value: kept in incident.duckdb so that
-- `forensics notices` renders the notices again from the database alone (forensics/report/notices.py).
-- grain: one row; reads: nothing; params: context (JSON text)
CREATE OR REPLACE TABLE notice_incident AS SELECT $context AS context;
