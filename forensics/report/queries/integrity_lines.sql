-- The engines' integrity lines that name an affected response (integrity_responses), each cited by its
-- file and line, with the response's status: what part 1 lists under "Engine integrity lines".
-- grain: request_id, file_id, line; reads: integrity_responses, report_affected; params: none
SELECT i.request_id, coalesce(a.account_id, '') AS account_id, i.node, a.status, i.cite AS line, i.why AS proves
FROM integrity_responses i JOIN report_affected a USING (request_id)
ORDER BY a.status, i.request_id, i.file_id, i.line
