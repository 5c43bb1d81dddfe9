"""KV Forensics: incident forensics and blast-radius analysis for KV-cache leaks.

The stages and their order are in forensics.pipeline; ARCHITECTURE.md maps the tree.
"""

__version__ = "0.1.0"
