"""Writes. Each benchmark has its own module; ``runs`` holds the run life cycle they share."""
