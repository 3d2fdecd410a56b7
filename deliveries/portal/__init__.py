"""The tenants' self-service portal: server-rendered pages scoped to one tenant.

Mount it in the host's URLconf::

    path("portal/", include("deliveries.portal.urls")),

A request belongs to a tenant through a portal session (opened by a one-time link from
``POST /api/v1/portal-sessions``) or, when ``WEBHOOKS_PORTAL_TENANT_RESOLVER`` names a
callable, through the host's own login. Every page reads and writes through services
with that tenant, so nothing of another tenant can be reached.
"""
