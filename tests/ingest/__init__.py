"""Tests of the ingest stage (forensics.ingest)."""
