"""Tests of the simulate stage (forensics.simulate)."""
