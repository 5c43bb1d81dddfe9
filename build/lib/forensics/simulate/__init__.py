"""Deterministic discrete-event simulator of a prefill/decode-disaggregated SGLang cluster.

`simulate(out, cfg)` writes `out/bundle/` (an evidence bundle in the contract's shape) and
`out/truth/` (responses.csv, exposures.csv, summary.json) computed from the simulated pool contents.
"""

from forensics.simulate.config import SimConfig, build_config
from forensics.simulate.run import simulate

__all__ = ["SimConfig", "build_config", "simulate"]
