"""Audit-findings benchmark: parsing, LLM-consensus matching, metrics and reports (pure)."""
