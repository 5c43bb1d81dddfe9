-- A text file's lines ($path), one VARCHAR column: no quoting, a delimiter that text lines do not contain
-- (chr(30)), lines up to $max_line bytes; a single reader thread and insertion order kept, so rowid + 1
-- is the line number (forensics.ingest.rawtext stores them as the table its caller names).
-- grain: line of a text file; reads: the file $path; params: $path, $max_line
SELECT line FROM read_csv($path, columns = {'line': 'VARCHAR'}, delim = chr(30), quote = '', escape = '',
    header = false, auto_detect = false, parallel = false, max_line_size = $max_line, strict_mode = false,
    null_padding = true, new_line = '\n')
