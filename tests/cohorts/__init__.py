"""Tests of the cohorts stage (forensics.cohorts)."""
