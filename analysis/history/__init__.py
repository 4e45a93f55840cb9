"""The history: every run kept across results roots and months in one store (SQLite by default, a team's
PostgreSQL by URL), selected, aggregated, each configuration watched for change against its own history, two
selections compared on whole runs, and published as trend pages. Imports the ground floor and every other room."""
