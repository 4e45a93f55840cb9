"""The vocabulary every part of hvdbench shares, importable without any training framework: errors and
input validation, RunSpec, the record schema and rank logs, throughput and outcome, the swept axes, the
benchmark catalog and its flags, collective descriptors, GPU choice, NVML facts, the node's topology.
The rank side (suite/), the launchers and the analysis import it; it imports none of them
(tests/test_layout_imports_and_sizes.py)."""
