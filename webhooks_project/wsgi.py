import os

from django.core.wsgi import get_wsgi_application

from webhooks_core.runtime.collector import settle_after_start_up

from .bodies import BufferedBody

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webhooks_project.settings")

# The body is read before Django runs, so a slow client holds no thread and no database
# connection (webhooks_project/bodies.py; the Procfile runs gunicorn's gevent worker).
application = BufferedBody(get_wsgi_application())
# What loading the application made, out of the garbage collector's sight.
settle_after_start_up()
