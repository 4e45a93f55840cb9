"""Readers of other tools' outputs (MLPerf Training's result folders, published scaling tables): pure functions from
their text to records, beside the vocabulary (core/), importing nothing else of hvdbench."""
