"""Reads across models (leaderboards, reports, visibility)."""
