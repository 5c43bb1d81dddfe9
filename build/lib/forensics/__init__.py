"""KV Forensics: incident forensics and blast-radius analysis for KV-cache leaks.

Pipeline stages, one module each: ingest -> ownership -> findings -> cohorts -> report.
"""

__version__ = "0.1.0"
