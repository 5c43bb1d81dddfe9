-- The allocator model behind the possible sources' likelihoods (forensics.findings.likelihood), per
-- decode node without page telemetry: its policy, what it was learned and calibrated on.
-- grain: node; reads: allocator_model; params: none
SELECT node, coalesce(policy, 'none') AS policy, basis, members, coalesce(calibration, '') AS calibration
FROM allocator_model ORDER BY node
