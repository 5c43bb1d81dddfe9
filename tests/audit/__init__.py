"""Tests of the audit stage (forensics.audit)."""
