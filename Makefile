# Two commands do everything on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
# `pip install --user uv` lands in ~/.local/bin; make sure recipes find it there.
export PATH := $(HOME)/.local/bin:$(PATH)
UV := uv
RUN := $(UV) run --frozen
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: help uv venv migrate demo demo-data serve test test-postgres lint format bench remigrate clean

help:
	@echo "make demo   - set up, load sample data, run all three benchmarks, serve the site"
	@echo "make test   - run the test suite (SQLite; see .ci/run for PostgreSQL + Redis)"
	@echo "make lint   - ruff and mypy"
	@echo "make bench  - speed benchmarks (figures and ratios)"

uv:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --user uv \
		|| $(PYTHON) -m pip install --quiet --break-system-packages uv

venv: uv
	@$(UV) sync --frozen --quiet

migrate: venv
	DEBUG=1 $(RUN) python manage.py migrate --noinput

demo-data: migrate
	DEBUG=1 Q_SYNC=1 $(RUN) python manage.py demo_setup

demo: demo-data
	DEBUG=1 $(RUN) python manage.py demo_serve --host $(HOST) --port $(PORT)

serve: migrate
	DEBUG=1 $(RUN) python manage.py demo_serve --host $(HOST) --port $(PORT)

test: venv
	$(RUN) pytest -n 2 --dist loadfile -p no:cacheprovider

lint: venv
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	DEBUG=1 $(RUN) mypy .

format: venv
	$(RUN) ruff check --fix .
	$(RUN) ruff format .

# Benchmarks use a throwaway database so they never touch the demo data.
BENCH_DB := $(CURDIR)/.bench.sqlite3
bench: venv
	rm -f $(BENCH_DB)*
	DEBUG=1 Q_SYNC=1 DATABASE_URL=sqlite:///$(BENCH_DB) $(RUN) python manage.py migrate --noinput -v 0
	DEBUG=1 Q_SYNC=1 DATABASE_URL=sqlite:///$(BENCH_DB) $(RUN) python manage.py run_benchmarks $(BENCH)

# Development helper while the schema is still young: regenerate 0001_initial from the models.
remigrate: venv
	mv benchmarks_app/migrations/0002_load_checklist_questions.py /tmp/0002_load_checklist_questions.py
	rm -f benchmarks_app/migrations/0001_initial.py
	DEBUG=1 $(RUN) python manage.py makemigrations benchmarks_app --name initial
	mv /tmp/0002_load_checklist_questions.py benchmarks_app/migrations/

clean:
	rm -rf .venv staticfiles db.sqlite3* media .pytest_cache .mypy_cache .ruff_cache
