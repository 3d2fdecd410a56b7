# The two commands a newcomer needs: `make run` and `make test` (see README).
.PHONY: run test lint bench setup docs docs-gen

# Tests run on the real stack: PostgreSQL and Redis on this machine unless overridden. Some
# need more (RabbitMQ, NATS, the redis-server and PostgreSQL server binaries, Chromium):
# absent, they skip with one line naming it; under CI (CI set) they fail. See the README.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/webhooks
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15

setup:
	@bin/setup

# Only what running needs (the apps and the deploy group); the test, lint and docs tools
# come with `make test`.
run:
	@bin/setup run
	.venv/bin/python manage.py serve $(ADDR)

# With DEBUG off the settings refuse a missing, shipped or weak key, so each run makes its
# own (the processes the tests start inherit them); plain http, so no redirect to https.
test: setup
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) DEBUG=false \
	WEBHOOKS_ALLOWED_NETWORKS=127.0.0.0/8,::1 WEBHOOKS_REQUIRE_HTTPS=false \
	SECURE_SSL_REDIRECT=false \
	SECRET_KEY="$${TEST_SECRET_KEY:-$$(.venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(50))')}" \
	WEBHOOKS_ENCRYPTION_KEY="$${TEST_ENCRYPTION_KEY:-$$(.venv/bin/python -m webhooks_core.crypto.encryption)}" \
	.venv/bin/python -m pytest $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy .
	DEBUG=true .venv/bin/python manage.py makemigrations --check --dry-run

# The benchmark scenarios, ours beside django-webhook: `make bench BENCH_ARGS="--quick --no-peer"`.
bench: setup
	.venv/bin/python -m bench $(BENCH_ARGS)

# The documentation site (docs/, mkdocs.yml) into site/. Fails on a stale generated page
# (configuration reference, OpenAPI schema), a broken link or anchor, or a page no menu reaches.
docs: setup
	DEBUG=true .venv/bin/python -m webhooks_project.docsgen --check
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

# Regenerate docs/configuration.md and docs/api/openapi.yaml from the code.
docs-gen: setup
	DEBUG=true .venv/bin/python -m webhooks_project.docsgen
