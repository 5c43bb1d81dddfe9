"""Tests of the findings stage (forensics.findings)."""
