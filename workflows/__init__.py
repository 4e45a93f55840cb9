"""What runs and then judges, below the command line: a plan run here (the executor made once, its runs recorded once
and reported from the same collection), rounds until decided, and the judging commands (the report and the verdict
kept). Each returns an ``Outcome`` the command line prints. Imports the core, the readers, the launchers and the
analysis; never the command line."""
