"""The paper checklist challenge, pure parts: extraction, normalization, judges and scores."""
