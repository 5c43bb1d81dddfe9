-- The findings rows behind each notice line of one role ($role): the request the line names (in the
-- findings file $file, its column $column) and each finding id of that request, for the requests the
-- notices list (notice_requests), of every account ($every) or of the accounts $only.
-- grain: (request, finding id) a notice line cites; reads: finding_evidence, notice_requests; params: $role, $file, $column, $every, $only
WITH e AS (
    SELECT CASE $column WHEN 'source_request_id' THEN source_request_id ELSE request_id END AS cited, finding_id
    FROM finding_evidence WHERE finding_file = $file
)
SELECT DISTINCT e.cited, e.finding_id FROM e
JOIN (SELECT DISTINCT request_id FROM notice_requests
      WHERE role = $role AND ($every OR account_id IN (SELECT unnest($only::VARCHAR[])))) n
  ON n.request_id = e.cited
ORDER BY 1, 2
