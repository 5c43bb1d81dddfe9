"""Tests of the ownership stage (forensics.ownership)."""
