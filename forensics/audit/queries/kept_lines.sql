-- The lines the audit's sieve keeps (fidx, line, text) of whole files whose lines are in sieve_lines
-- (fidx, line from 1, text: a view over the table DuckDB's line reader filled), for the files $fidx,
-- each with whether it is loose ($loose) and whether its head was sniffed ($sniffed, forensics.audit.
-- sieved.Sieved). A line left out is one past the head (the first $sniff_lines lines), or anywhere in a
-- file whose head was sniffed, holding no word ($hit_pattern: the words the parses read, as one RE2
-- alternation) that is plain (SGLang's record prefix, $prefix: the file holds no byte that would unmake
-- it) and followed by a plain line or the end, as the Python sieve leaves out; in a loose file, any such
-- line holding no word but a blank one. Either is a logical line of its own, and the lines around it read
-- the same without it; the head is kept only for the sniff, which a sniffed file's Sieved has done. A
-- line is kept for what it holds, or as the line before one that is not plain (no sort: such lines are few).
-- grain: kept line of an engine file; reads: sieve_lines; params: $fidx, $loose, $sniffed, $prefix, $hit_pattern, $sniff_lines
WITH l AS (SELECT unnest($fidx) AS fidx, unnest($loose) AS loose, unnest($sniffed) AS sniffed),
     r AS (SELECT fidx, line, text, loose, sniffed, coalesce(regexp_matches(text, $prefix), false) AS plain,
                  coalesce(regexp_matches(text, $hit_pattern), false) AS hit,
                  coalesce(regexp_matches(text, '^[!-~]'), false) AS nonblank
           FROM sieve_lines JOIN l USING (fidx)),
     k AS (SELECT fidx, line FROM r
           WHERE (line <= $sniff_lines AND NOT sniffed) OR hit
                 OR NOT CASE WHEN loose THEN nonblank ELSE plain END
           UNION
           SELECT fidx, line - 1 FROM r WHERE NOT loose AND NOT plain AND line > 1)
SELECT fidx, line, coalesce(text, '') AS text FROM sieve_lines JOIN k USING (fidx, line)
