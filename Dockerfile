FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/venv \
    PATH="/opt/venv/bin:$PATH"

RUN pip install --no-cache-dir "uv>=0.5"
WORKDIR /app
COPY pyproject.toml uv.lock ./
# The deploy group (the Procfile's processes and webhooks_project's settings), not dev.
RUN uv sync --frozen --no-dev --no-install-project
COPY . .
RUN DEBUG=true python manage.py collectstatic --noinput

# Every directory a service mounts a volume on (docker-compose.yml), made here and owned by
# `app`: a volume mounted on a missing directory is created by Docker, owned by root.
RUN useradd --create-home app \
    && mkdir -p /var/lib/webhooks-metrics /var/lib/webhooks-media \
    && chown app:app /var/lib/webhooks-metrics /var/lib/webhooks-media
USER app
EXPOSE 8000 5555
# With DEBUG off (the default with DATABASE_URL set) the settings refuse to load without
# strong SECRET_KEY and WEBHOOKS_ENCRYPTION_KEY, so this exits at once naming them.
CMD ["gunicorn", "webhooks_project.wsgi", "--bind", "0.0.0.0:8000", "--workers", "2", \
     "--worker-class", "webhooks_project.web_worker.GeventWorker", "--worker-connections", "1000", "--keep-alive", "5", \
     "--logger-class", "webhooks_project.accesslog.RedactingLogger"]
