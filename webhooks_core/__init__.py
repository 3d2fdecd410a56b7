"""The ground floor of django-reliable-webhooks, shared by both apps and importing neither:
the settings registry, encryption at rest, signing and key formats, the SSRF guard and its
transport, tracing, the retry policy, JSON limits, leased jobs, batched maintenance, Celery
wiring, the HTTP API's base classes, API tokens and the audit log, and the operational views
a host mounts (liveness, readiness, ``/metrics``, the 503 middleware). A Django app: a host
installs it beside ``deliveries``, ``receivers`` or both."""

import django_stubs_ext

# The apps subscript Django's generic classes at run time (``ModelAdmin[Endpoint]``); a
# host must not have to know that, so the patch is applied on import of the apps.
django_stubs_ext.monkeypatch()
