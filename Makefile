# Two commands do everything on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
# `pip install --user uv` lands in ~/.local/bin; make sure recipes find it there.
export PATH := $(HOME)/.local/bin:$(PATH)
UV := uv
RUN := $(UV) run --frozen
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: help uv venv migrate demo demo-data serve manage test test-readme test-real-llm test-postgres lint format bench rush remigrate clean

help:
	@echo "make demo   - set up, load sample data, run all three benchmarks, serve the site"
	@echo "make serve  - the site, a worker and a webhook worker on HOST:PORT (default 127.0.0.1:8000), no reload"
	@echo "make manage ARGS=\"...\" - any manage.py command through the project's venv, DEBUG=1"
	@echo "make test   - run the test suite (SQLite; see .ci/run for PostgreSQL + Redis)"
	@echo "make test-readme - every command block of README.md, run in a fresh shell"
	@echo "make test-real-llm - the openai judge against llama-server with a small local model"
	@echo "make lint   - ruff and mypy"
	@echo "make bench  - speed benchmarks (figures and ratios)"
	@echo "make rush   - the deadline-rush load test on the production set-up (RUSH_USERS, RUSH_SECONDS)"

uv:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --user uv \
		|| $(PYTHON) -m pip install --quiet --break-system-packages uv

# Bytecode is compiled at install time: the environment may set PYTHONDONTWRITEBYTECODE, and
# without .pyc files every manage.py call, worker and test run compiles Django and the project
# again (manage.py check: 2.3 CPU-s without, 0.9 with). Both steps skip what is up to date.
venv: uv
	@$(UV) sync --frozen --quiet --compile-bytecode
	@.venv/bin/python -m compileall -q -j 0 benchmarks_app scoring config manage.py >/dev/null

migrate: venv
	DEBUG=1 $(RUN) python manage.py migrate --noinput

demo-data: migrate
	DEBUG=1 Q_SYNC=1 $(RUN) python manage.py demo_setup

demo: demo-data
	DEBUG=1 $(RUN) python manage.py demo_serve --host $(HOST) --port $(PORT)

serve: migrate
	DEBUG=1 $(RUN) python manage.py demo_serve --host $(HOST) --port $(PORT)

# Any manage.py command for local use, e.g. make manage ARGS="audit_leaderboard --format json":
# uv and DEBUG=1 come from here, so a fresh shell needs neither on PATH nor in its environment.
# A DEBUG, SECRET_KEY or DATABASE_URL already in the environment is kept.
manage: venv
	@DEBUG=$${DEBUG:-1} $(RUN) python manage.py $(ARGS)

# The real_llm tests need a server (make test-real-llm); they skip without one anyway.
# The readme test has a target of its own: it sets up a demo and serves it (a few minutes).
test: venv
	$(RUN) pytest -n 2 --dist loadfile -p no:cacheprovider -m "not real_llm and not readme"

# Every command block of README.md, run as written in a fresh shell (no ~/.local/bin on PATH,
# no DEBUG, no SECRET_KEY) against a demo in a temporary database.
test-readme: venv
	$(RUN) pytest -p no:cacheprovider -m readme tests/test_readme_commands.py

# The openai judge against a real OpenAI-compatible server: llama.cpp's llama-server with
# SmolLM2-135M-Instruct on the CPU, built (first time, several minutes) and started by
# .ci/llama_server.sh, stopped again however the tests end.
test-real-llm: venv
	@url=$$(bash .ci/llama_server.sh start) || exit $$?; \
	trap 'bash .ci/llama_server.sh stop' EXIT; \
	echo "test-real-llm: server at $$url"; \
	REAL_LLM_BASE_URL=$$url $(RUN) pytest -p no:cacheprovider -rA -m real_llm tests/real_server

lint: venv
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	DEBUG=1 $(RUN) mypy .

format: venv
	$(RUN) ruff check --fix .
	$(RUN) ruff format .

# Benchmarks use a throwaway database so they never touch the demo data: a SQLite file, or,
# when DATABASE_URL points at PostgreSQL (the production footing), a database of that server
# named after the configured one with _bench appended, dropped and created again
# (benchmarks_app/bench/_bench_database.py). The board benches seed their own scratch
# databases on the same server.
BENCH_DB := $(CURDIR)/.bench.sqlite3
BENCH_ON_POSTGRES := $(filter postgres://% postgresql://%,$(DATABASE_URL))
BENCH_DATABASE_URL := $(if $(BENCH_ON_POSTGRES),$(DATABASE_URL)_bench,sqlite:///$(BENCH_DB))
bench: venv
	rm -f $(BENCH_DB)*
	$(if $(BENCH_ON_POSTGRES),DEBUG=1 DATABASE_URL=$(BENCH_DATABASE_URL) $(RUN) python manage.py \
		shell -c "from benchmarks_app.bench._bench_database import recreate; print('bench database', recreate())")
	DEBUG=1 Q_SYNC=1 DATABASE_URL=$(BENCH_DATABASE_URL) $(RUN) python manage.py migrate --noinput -v 0
	DEBUG=1 Q_SYNC=1 DATABASE_URL=$(BENCH_DATABASE_URL) $(RUN) python manage.py run_benchmarks $(BENCH)

# The deadline rush (issue 35): the bench starts gunicorn, the queue clusters and its own
# database itself; the throwaway SQLite above only hosts the bench command.
rush:
	$(MAKE) bench BENCH=rush

# Development helper while the schema is still young: regenerate 0001_initial from the models.
remigrate: venv
	mv benchmarks_app/migrations/0002_load_checklist_questions.py /tmp/0002_load_checklist_questions.py
	rm -f benchmarks_app/migrations/0001_initial.py
	DEBUG=1 $(RUN) python manage.py makemigrations benchmarks_app --name initial
	mv /tmp/0002_load_checklist_questions.py benchmarks_app/migrations/

clean:
	rm -rf .venv staticfiles db.sqlite3* media .pytest_cache .mypy_cache .ruff_cache
