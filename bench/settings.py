"""The project's settings plus the benchmark's trivial view (see ``bench.urls``).

Only ``python -m bench.receiving`` serves with these (``DJANGO_SETTINGS_MODULE``); the
product never routes ``/bench/``.
"""

from webhooks_project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
