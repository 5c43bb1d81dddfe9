"""Fault injection (#47): simulated incidents damaged as real shippers and exporters damage evidence
(tests.support.damage), the disclosure checked against the simulator's truth (tests.support.faultcheck)."""
