-- Step 9 of gateway_join_end: drops assign_edges
-- grain: no rows: drops assign_edges, this step's scratch; reads: nothing; params: none
DROP TABLE assign_edges;
