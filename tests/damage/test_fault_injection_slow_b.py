"""#47's fault-injection suite on part 2 of the slow incidents (SLOW_PARTS[1]): see test_fault_injection_slow.py."""

from tests.damage.test_fault_injection import faults_root, incidents, slow_part  # noqa: F401 (the fixtures)

test_damaged_evidence_keeps_the_disclosure_true_slow = slow_part(1)
