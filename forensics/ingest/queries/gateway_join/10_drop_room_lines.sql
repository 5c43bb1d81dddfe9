-- Step 10 of gateway_join: drops room_lines
-- grain: no rows: drops room_lines, this step's scratch; reads: nothing; params: none
DROP TABLE room_lines;
