"""What ``make demo`` loads and runs, one module per benchmark.

Each module exposes ``run_demo(out)``: import the bundled sample data (idempotently), run the
benchmark through the queue with the offline judge, and write its leaderboard to ``out``.
"""

from __future__ import annotations

from pathlib import Path

SAMPLE_DATA = Path(__file__).resolve().parent.parent / "sample_data"


def _admin_password_file() -> Path:
    """Where the demo's generated admin password is kept, one file per database.

    Under the project's git-ignored ``.cache/``; keyed on the database so that a demo set up
    on another database (a test's temporary one) never overwrites the password of this one.
    """
    import hashlib

    from django.conf import settings
    from django.db import connection

    database = connection.settings_dict
    key = f"{database['ENGINE']}|{database.get('HOST', '')}|{database['NAME']}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return Path(settings.BASE_DIR) / ".cache" / "demo-admin" / f"{digest}.txt"


def admin_password_save(*, username: str, password: str) -> None:
    """Keep the demo admin's password so that ``make serve`` can print it again."""
    path = _admin_password_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{username}\n{password}\n", encoding="utf-8")
    path.chmod(0o600)


def admin_password_line() -> str:
    """One line naming the demo admin and its password, or saying why there is none."""
    from django.contrib.auth import get_user_model

    try:
        username, password = _admin_password_file().read_text(encoding="utf-8").split()[:2]
    except (FileNotFoundError, ValueError):
        return (
            "Admin: no demo password stored for this database (run `make demo`, or "
            '`make manage ARGS="changepassword admin"`).'
        )
    user = get_user_model().objects.filter(username=username).first()
    if user is None or not user.check_password(password):
        return (
            f"Admin: the demo password of '{username}' was changed since `make demo` "
            f'(`make manage ARGS="changepassword {username}"` sets a new one).'
        )
    return f"Admin: user '{username}', password {password}"
