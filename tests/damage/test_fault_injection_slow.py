"""#47's fault-injection suite on the slow incidents (test_fault_injection.py has the properties and the
always-run incidents): every damage kind on each. The slow incidents are split over this file and
test_fault_injection_slow_b/_c/_d.py (SLOW_PARTS: together every incident of SLOW, each once), so that
the two test workers share them: a worker takes a file at a time."""

from tests.damage.test_fault_injection import faults_root, incidents, slow_part  # noqa: F401 (the fixtures)

test_damaged_evidence_keeps_the_disclosure_true_slow = slow_part(0)
