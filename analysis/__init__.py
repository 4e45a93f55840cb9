"""The analysis: from run folders to answers. Its ground floor reads every run into DataFrames with explicit
schemas (``collect``, ``rank_logs``) and holds what every room shares (``keys``: what "the same" means;
``stats`` and ``ratios``: medians, intervals, resamples; ``document``: sections and safe text; ``drawing``: what
every plot draws through). The rooms:

- ``tables``: what was measured (scaling, efficiency, collectives, p2p, screening, run details, summaries);
- ``verdicts``: does it meet what was promised, which offer is better, what changed (accept, compare, regressions);
- ``projection``: what N nodes would do (the allreduce model, targets, the projection);
- ``report``: the document (Markdown, HTML, CSV, plots) that puts them together;
- ``history``: every run kept across results roots and months (the store), each configuration watched for
  change against its own history, two selections compared, the trend pages.

A room imports the ground floor and the rooms before it in that list, never one after it (checked by a test).
"""
