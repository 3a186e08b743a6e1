"""The benchmark: generated incident bundles of a given size, the baselines, and the runner behind ``make bench``."""
