"""What each engine writes in its logs: one module per engine holds the patterns of its lines, read
by both ingest (forensics.ingest.engine: per-request lines and the node's config) and the config
audit (forensics.audit: pool size against context length), so the two never read a line apart."""
