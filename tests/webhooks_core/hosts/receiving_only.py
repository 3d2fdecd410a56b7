"""The reference deployment's settings without the sending side (and the demo shop, which
sends): a host that only receives, for the migration tests."""

from webhooks_project.settings import *  # noqa: F403
from webhooks_project.settings import INSTALLED_APPS

INSTALLED_APPS = [
    app
    for app in INSTALLED_APPS
    if app not in ("deliveries", "examples.demo_shop.apps.DemoShopConfig")
]
ROOT_URLCONF = "receivers.urls"
