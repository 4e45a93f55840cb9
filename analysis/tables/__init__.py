"""What was measured, as tables: scaling and efficiency with intervals, collectives and p2p bandwidth, screening,
run details, summaries. Imports the ground floor (analysis/*.py) only."""
