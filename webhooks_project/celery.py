"""The Celery application. Configuration lives in settings.py under the CELERY_ prefix.

Database connections: Celery's Django fix-up (active because DJANGO_SETTINGS_MODULE is set
before the app is created) closes the task thread's Django connections before and after
every task, in prefork, thread and gevent pools alike, so a thread never keeps a broken
connection.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webhooks_project.settings")

app = Celery("webhooks_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["webhooks_project", "deliveries", "receivers"])
