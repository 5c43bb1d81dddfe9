-- Per node: the config audit's verdict, reason, input limit and evidence lines as ingest stored them
-- (node_audit); a failed audit is its one row without a node.
-- grain: node; reads: node_audit; params: none
SELECT node, verdict, reason, max_req_input_len, evidence_lines FROM node_audit ORDER BY node NULLS FIRST;
