"""The SGLang plugin in a production-shaped cluster (issue #48): one OS process per node (node.py),
the driver that makes the workload, relays the transfers and keeps the truth (driver.py), and the
comparison of `forensics investigate` and the guard with that truth (score.py). stubs.py stands in for
the packages SGLang's scheduler imports but the test venv lacks. benchmarks/plugin_multiproc.py prints
the table; tests/sglang_plugin/test_multiproc.py holds the harness and the plugin's properties."""
