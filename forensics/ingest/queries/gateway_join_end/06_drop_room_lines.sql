-- Step 6 of gateway_join_end: drops room_lines
-- grain: no rows: drops room_lines, this step's scratch; reads: nothing; params: none
DROP TABLE room_lines;
