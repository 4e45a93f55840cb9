"""Does it meet what was promised, which offer is better, what changed: accept, compare, regressions, each a
verdict with its interval or "not judged". Imports the ground floor and ``tables``."""
