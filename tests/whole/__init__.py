"""Tests of the whole tool: determinism, bad input end to end, the wheel, import and query contracts."""
