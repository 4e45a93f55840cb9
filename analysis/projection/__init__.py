"""What N nodes would do: the allreduce model fitted to measured curves, target clusters, and the projection
with its intervals. Imports the ground floor and ``tables``."""
