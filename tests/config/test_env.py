from __future__ import annotations

from pathlib import Path

import pytest

from config import env as envparse


def test_bool_int_float_list_parse_and_reject_garbage() -> None:
    env = {"A": "yes", "B": "0", "N": "7", "F": "2.5", "L": "a.com, b.com,,"}
    assert envparse.env_bool(env, "A", False) is True
    assert envparse.env_bool(env, "B", True) is False
    assert envparse.env_bool(env, "MISSING", True) is True
    assert envparse.env_int(env, "N", 1) == 7
    assert envparse.env_float(env, "F", 0.0) == 2.5
    assert envparse.env_list(env, "L", []) == ["a.com", "b.com"]
    with pytest.raises(envparse.ImproperlyConfiguredEnv, match="A2"):
        envparse.env_bool({"A2": "maybe"}, "A2", False)
    with pytest.raises(envparse.ImproperlyConfiguredEnv, match="not an integer"):
        envparse.env_int({"N": "seven"}, "N", 1)
    with pytest.raises(envparse.ImproperlyConfiguredEnv, match="at least 1"):
        envparse.env_int({"N": "0"}, "N", 1, minimum=1)


def test_secret_key_required_without_debug_and_generated_with_it(tmp_path: Path) -> None:
    with pytest.raises(envparse.ImproperlyConfiguredEnv, match="SECRET_KEY is required"):
        envparse.secret_key({}, debug=False, key_file=tmp_path / "key")
    assert not (tmp_path / "key").exists()
    generated = envparse.secret_key({}, debug=True, key_file=tmp_path / "key")
    assert generated.startswith("dev-insecure-") and len(generated) > 40
    # Every process (web, qcluster workers) must get the same key: it signs queued tasks.
    assert envparse.secret_key({}, debug=True, key_file=tmp_path / "key") == generated
    assert (tmp_path / "key").read_text() == generated
    assert envparse.secret_key({"SECRET_KEY": "s3cret"}, debug=False) == "s3cret"


def test_database_defaults_to_sqlite_file_and_reads_database_url(tmp_path: Path) -> None:
    default = envparse.database({}, tmp_path)
    assert default["ENGINE"] == "django.db.backends.sqlite3"
    assert Path(default["NAME"]) == tmp_path / "db.sqlite3"
    assert default["OPTIONS"]["timeout"] == 30
    pg = envparse.database({"DATABASE_URL": "postgres://u:p@db.example:5433/evals"}, tmp_path)
    assert pg["ENGINE"] == "django.db.backends.postgresql"
    assert (pg["NAME"], pg["HOST"], pg["PORT"], pg["USER"]) == ("evals", "db.example", 5433, "u")


def test_broker_switch_orm_by_default_redis_with_url() -> None:
    orm = envparse.q_cluster({})
    assert orm["orm"] == "default" and "redis" not in orm
    assert orm["timeout"] < orm["retry"]
    assert orm["sync"] is False
    redis = envparse.q_cluster(
        {"REDIS_URL": "redis://127.0.0.1:6379/2", "Q_WORKERS": "6", "Q_SYNC": "1"}
    )
    assert redis["redis"] == "redis://127.0.0.1:6379/2" and "orm" not in redis
    assert redis["workers"] == 6
    assert redis["sync"] is True


def test_retry_must_exceed_timeout() -> None:
    with pytest.raises(envparse.ImproperlyConfiguredEnv, match="Q_RETRY"):
        envparse.q_cluster({"Q_TIMEOUT": "600", "Q_RETRY": "600"})


def test_settings_module_reads_judge_and_challenge_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    import config.settings as settings_module

    monkeypatch.setenv("DEBUG", "1")
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9999/v1")
    monkeypatch.setenv("JUDGE_MODELS", "gpt-x,gpt-y")
    monkeypatch.setenv("JUDGE_ITERATIONS", "5")
    monkeypatch.setenv("CHECKLIST_DAILY_LIMIT", "9")
    monkeypatch.setenv("ALLOWED_HOSTS", "evals.example.org")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/3")
    try:
        reloaded = importlib.reload(settings_module)
        assert reloaded.JUDGE_DEFAULT == "openai"
        assert reloaded.OPENAI_BASE_URL == "http://127.0.0.1:9999/v1"
        assert reloaded.JUDGE_MODEL == "gpt-x" and reloaded.JUDGE_MODELS == ["gpt-x", "gpt-y"]
        assert reloaded.JUDGE_ITERATIONS == 5
        assert reloaded.CHECKLIST_DAILY_LIMIT == 9
        assert reloaded.ALLOWED_HOSTS == ["evals.example.org"]
        assert reloaded.Q_CLUSTER["redis"] == "redis://127.0.0.1:6379/3"
        assert reloaded.SECRET_KEY.startswith("dev-insecure-")
    finally:
        monkeypatch.undo()
        importlib.reload(settings_module)


def test_production_cookie_and_https_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    import config.settings as settings_module

    monkeypatch.setenv("DEBUG", "0")
    monkeypatch.setenv("SECRET_KEY", "k")
    monkeypatch.setenv("SECURE_HSTS_SECONDS", "3600")
    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER_FORWARDED_PROTO", "1")
    try:
        prod = importlib.reload(settings_module)
        assert prod.SESSION_COOKIE_SECURE and prod.CSRF_COOKIE_SECURE
        assert prod.SECURE_HSTS_SECONDS == 3600 and prod.SECURE_HSTS_INCLUDE_SUBDOMAINS
        assert prod.SECURE_PROXY_SSL_HEADER == ("HTTP_X_FORWARDED_PROTO", "https")
        monkeypatch.setenv("DEBUG", "1")
        monkeypatch.delenv("SECURE_HSTS_SECONDS")
        dev = importlib.reload(settings_module)
        assert not dev.SESSION_COOKIE_SECURE and dev.SECURE_HSTS_SECONDS == 0
    finally:
        monkeypatch.undo()
        importlib.reload(settings_module)


def test_weights_parse_and_reject_malformed_items() -> None:
    assert envparse.env_weights({}, "W") == {}
    assert envparse.env_weights({"W": "low=0.25, critical=3"}, "W") == {
        "low": 0.25,
        "critical": 3.0,
    }
    with pytest.raises(envparse.ImproperlyConfiguredEnv, match="'high' is not NAME=NUMBER"):
        envparse.env_weights({"W": "low=1,high"}, "W")
    with pytest.raises(envparse.ImproperlyConfiguredEnv, match="W: 'low=x'"):
        envparse.env_weights({"W": "low=x"}, "W")


def test_an_empty_key_file_is_replaced_by_one_shared_key(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("")
    first = envparse.secret_key({}, debug=True, key_file=key_file)
    assert first.startswith("dev-insecure-") and key_file.read_text() == first
    assert envparse.secret_key({}, debug=True, key_file=key_file) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key"]  # no temporary file left


def test_audit_daily_limit_can_be_lifted(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    import config.settings as settings_module

    monkeypatch.setenv("AUDIT_DAILY_SUBMISSIONS", "none")
    try:
        assert importlib.reload(settings_module).AUDIT_DAILY_SUBMISSIONS is None
        monkeypatch.setenv("AUDIT_DAILY_SUBMISSIONS", "4")
        assert importlib.reload(settings_module).AUDIT_DAILY_SUBMISSIONS == 4
    finally:
        monkeypatch.undo()
        importlib.reload(settings_module)


def test_webhooks_have_a_cluster_of_their_own() -> None:
    conf = envparse.q_cluster({"Q_NAME": "site", "WEBHOOK_WORKERS": "3", "WEBHOOK_TIMEOUT_S": "40"})
    assert envparse.webhook_cluster_name({"Q_NAME": "site"}) == "site-webhooks"
    lane = conf["ALT_CLUSTERS"]["site-webhooks"]
    assert lane["workers"] == 3
    # A delivery (at most WEBHOOK_TIMEOUT_S) ends before the queue's timeout, and the timeout
    # before a task is handed out again.
    assert 40 < lane["timeout"] < lane["retry"]


def test_choice_names_the_variable_and_its_choices() -> None:
    choices = ("adaptive", "two", "single")
    assert envparse.env_choice({"V": " Two "}, "V", choices, "adaptive") == "two"
    assert envparse.env_choice({}, "V", choices, "adaptive") == "adaptive"
    with pytest.raises(envparse.ImproperlyConfiguredEnv, match=r"CHECKLIST_VOTES='three'.*two"):
        envparse.env_choice({"CHECKLIST_VOTES": "three"}, "CHECKLIST_VOTES", choices, "adaptive")
