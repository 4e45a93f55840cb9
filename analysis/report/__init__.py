"""The report: every room's tables as sections, rendered as Markdown, self-contained HTML (plots inline),
terminal text, CSV and Parquet. Imports the ground floor and every other room."""
