-- rejected.csv (spec section 6): every input row not loaded, with the file (relative to the bundle), the row and why.
-- grain: file, row, reason; reads: rejected, files; params: none
SELECT f.path AS file, r.row, r.reason FROM rejected r JOIN files f USING (file_id)
    ORDER BY f.path, r.row NULLS FIRST, r.reason
