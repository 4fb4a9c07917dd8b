"""django-q2 entry points: thin functions that take ids and call services."""
