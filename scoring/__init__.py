"""Pure-Python scoring: algorithms, judges and types. No Django imports (a test enforces it)."""
