"""The reference deployment's settings as a host from before 0.2 had them: the two sides
without webhooks_core."""

from webhooks_project.settings import *  # noqa: F403
from webhooks_project.settings import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "webhooks_core"]
