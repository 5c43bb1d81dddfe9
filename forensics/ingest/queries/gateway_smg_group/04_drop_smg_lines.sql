-- Step 4 of gateway_smg_group: drops smg_lines
-- grain: no rows: drops smg_lines, this step's scratch; reads: nothing; params: none
DROP TABLE smg_lines;
