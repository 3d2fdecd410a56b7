# Imported first: applies what the apps need at run time (see webhooks_core/__init__.py).
import webhooks_core  # noqa: F401
