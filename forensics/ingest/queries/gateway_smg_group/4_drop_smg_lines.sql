-- Step 4 of gateway_smg_group: drops smg_lines
-- grain: n/a; reads: nothing; params: none
DROP TABLE smg_lines;
