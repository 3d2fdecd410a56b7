"""What both apps of django-reliable-webhooks share: the settings registry, encryption at
rest, leased jobs, batched maintenance, Celery wiring and the operational views a host
mounts (probes, ``/metrics``, the 503 middleware). Not a Django app of its own: a host
installs only ``deliveries`` and ``receivers``."""

import django_stubs_ext

# The apps subscript Django's generic classes at run time (``ModelAdmin[Endpoint]``); a
# host must not have to know that, so the patch is applied on import of the apps.
django_stubs_ext.monkeypatch()
