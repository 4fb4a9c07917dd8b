"""The judge layer shared by the audit and checklist benchmarks."""
