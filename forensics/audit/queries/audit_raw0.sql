-- The lines of a server's plain files ($names), each with its file's name: one VARCHAR column, no
-- quoting, a delimiter that text lines do not contain, lines up to $max_line bytes, no decompression;
-- one reader thread and insertion order kept, so the rowids of a file's lines follow each other, in order.
-- grain: line of a plain engine file; reads: the files $names; params: $names, $max_line
CREATE OR REPLACE TEMP TABLE audit_raw0 AS
SELECT filename, line FROM read_csv($names, columns = {'line': 'VARCHAR'}, delim = chr(30), quote = '',
    escape = '', header = false, auto_detect = false, parallel = false, max_line_size = $max_line,
    strict_mode = false, null_padding = true, new_line = '\n', compression = 'none', filename = true)
