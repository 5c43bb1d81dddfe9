"""Tests of the report stage (forensics.report)."""
