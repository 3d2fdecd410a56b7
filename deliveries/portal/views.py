"""The portal's pages. Each one takes the session's tenant and scopes every query by it;
writes go through the same services as the API and the admin."""

import json
import logging
from typing import Any
from uuid import UUID

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from deliveries import catalogue, selectors, services
from deliveries.endpoints import auth_forms, principals
from deliveries.endpoints.lifecycle import DEFAULT_ROTATION_GRACE_SECONDS
from deliveries.models import DeliveryStatus, Endpoint, EndpointMode, EndpointState, StateSetBy
from deliveries.pipeline import payloads
from deliveries.pipeline.rendering import versioned_payload
from deliveries.polling import services as polling
from deliveries.portal import access
from deliveries.portal.access import portal_view
from deliveries.portal.forms import DeliveryFilterForm, EndpointForm, RecoverForm, RotateForm

logger = logging.getLogger(__name__)

PAGE_SIZE = 25
RESPONSE_EXCERPT = 500
#: What a redirect may announce (`?notice=`): fixed texts, never data from the request.
NOTICES = {
    "created": "Endpoint added.",
    "saved": "Endpoint saved.",
    "saved-headers-dropped": "Endpoint saved. Its URL points at another host now, so the "
    "credentials set for the old one were removed: secret headers (ask your provider to set "
    "them again) and OAuth2 delivery auth (give it again here).",
    "disabled": "Endpoint disabled: nothing more is sent to it.",
    "enabled": "Endpoint enabled.",
    "deleted": "Endpoint deleted.",
    "test-sent": "Test event sent.",
    "validation-asked": "We asked your endpoint for its consent again (an OPTIONS request); "
    "reload this page to see its answer.",
    "validation-recent": "We asked your endpoint for its consent moments ago; its answer "
    "is on its way. Reload this page in a little while.",
    "test-refused": "Only an enabled endpoint can receive a test event.",
    "not-enabled": "Only the operator of this service can enable this endpoint again.",
    "test-first": "Send a test event first: once your endpoint answers it, you can resume.",
    "not-disabled": "Only an active endpoint can be disabled here.",
    "retried": "Delivery queued again.",
    "not-retried": "This delivery cannot be retried now.",
    "signed-out": "Signed out.",
}


def _redirect(name: str, *args: Any, notice: str = "") -> HttpResponseRedirect:
    url = reverse(f"webhooks_portal:{name}", args=args)
    return HttpResponseRedirect(f"{url}?{urlencode({'notice': notice})}" if notice else url)


#: The navigation entry each page belongs to.
SECTIONS = {
    "deliveries.html": "deliveries",
    "delivery.html": "deliveries",
    "recover.html": "recover",
    "event_types.html": "event-types",
}


def _page(
    request: HttpRequest, template: str, context: dict[str, Any], *, notice_key: str = ""
) -> TemplateResponse:
    notice = NOTICES.get(notice_key or request.GET.get("notice", ""))
    section = SECTIONS.get(template, "endpoints")
    return TemplateResponse(
        request,
        f"webhooks_portal/{template}",
        {"notice": notice, "section": section, **context},
    )


def _note(tenant: str, action: str, target: object) -> None:
    """A log line per change a tenant makes (operators read them; never a secret)."""
    logger.info("portal: tenant %s %s %s", tenant, action, target)


def _endpoint(tenant: str, pk: UUID) -> Endpoint:
    # Another tenant's endpoint is a 404, exactly like one that does not exist.
    return get_object_or_404(selectors.tenant_endpoints(tenant=tenant), pk=pk)


def _catalogue() -> list[dict[str, Any]]:
    return [
        {
            "name": event_type.name,
            "description": event_type.description,
            "versions": [
                {
                    "number": version.number,
                    "schema": json.dumps(version.schema, indent=2),
                    "example": json.dumps(version.example, indent=2),
                }
                for version in reversed(event_type.versions)
            ],
        }
        for event_type in catalogue.all_types()
    ]


# --- the session -----------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@csrf_protect
def open_link(request: HttpRequest, token: str) -> HttpResponse:
    """A one-time link: GET shows one button, its POST consumes the link.

    E-mail scanners and chat unfurlers GET links before the person does; a GET changes
    nothing, so the link still works when the person clicks. The button posts a plain
    form (no JavaScript), CSRF-checked, so another site cannot open a session in the
    visitor's browser behind their back; when the visitor already has a session for
    another tenant, the page says so before the switch. The session opened goes on to the
    portal's clean URL (no token in it). The token never reaches a log line
    (webhooks_project/accesslog.py).
    """
    current = access.session(request)
    if request.method == "POST":
        opened = services.portal_link_open(token=token)
        if opened is None:
            return access.refused(request, "link-used")
        if current is not None and current.pk != opened.link.pk:
            services.portal_session_end(session_id=current.pk)  # one session per browser
        response = HttpResponseRedirect(access.portal_root())
        access.open_session(
            response, request, secret=opened.secret, expires_at=opened.link.expires_at
        )
        access.private(response)
        response["Referrer-Policy"] = "no-referrer"
        return response
    link = services.portal_link_peek(token=token)
    if link is None:
        return access.refused(request, "link-used")
    signed_in_as = access.tenant_of(request)
    page = TemplateResponse(
        request,
        "webhooks_portal/open.html",
        {
            "link": link,
            "signed_in_as": signed_in_as if signed_in_as != link.tenant else None,
            "already_in": signed_in_as == link.tenant,
        },
    )
    # Same-origin (not no-referrer): the form's POST must carry its Origin for the CSRF
    # check over https, and the link's URL is sent to nobody else.
    page["X-Robots-Tag"] = "noindex, nofollow"
    return access.private(page)


@require_POST
@portal_view
def sign_out(request: HttpRequest, tenant: str) -> HttpResponse:
    current = access.session_id(request)
    if current is not None:
        services.portal_session_end(session_id=current)
    response = TemplateResponse(request, "webhooks_portal/signed_out.html", {})
    access.close_session(response)
    return response


# --- endpoints -------------------------------------------------------------------------


@require_GET
@portal_view
def home(request: HttpRequest, tenant: str) -> HttpResponse:
    return _page(
        request,
        "endpoints.html",
        {
            "tenant": tenant,
            "endpoints": list(selectors.tenant_endpoints(tenant=tenant)),
            "retention": services.tenant_retention(tenant=tenant),
        },
    )


def _endpoint_form_page(
    request: HttpRequest, tenant: str, form: EndpointForm, endpoint: Endpoint | None
) -> HttpResponse:
    return _page(
        request,
        "endpoint_form.html",
        {
            "tenant": tenant,
            "form": form,
            "endpoint": endpoint,
            "catalogue": {t["name"]: t for t in _catalogue()},
        },
    )


@sensitive_post_parameters(*auth_forms.SECRET_FIELDS)
@require_http_methods(["GET", "POST"])
@portal_view
def endpoint_add(request: HttpRequest, tenant: str) -> HttpResponse:
    form = EndpointForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            created = polling.endpoint_create_with_key(
                principal=principals.Principal(tenant=tenant),
                **form.service_fields(adding=True),
            )
        except (services.EndpointInvalid, principals.EndpointForbidden) as exc:
            form.add_service_errors(exc.errors)
        else:
            _note(tenant, "added endpoint", created.endpoint.pk)
            # The secret (and a polling endpoint's key) is shown once, on its own page,
            # never in a redirect or message.
            return _page(
                request,
                "secret.html",
                {
                    "tenant": tenant,
                    "endpoint": created.endpoint,
                    "secrets": [(created.secret, None)],
                    "new": True,
                    "poll_key": created.poll_key,
                    "poll_url": _poll_url(request, created.endpoint),
                },
            )
    return _endpoint_form_page(request, tenant, form, None)


def _poll_url(request: HttpRequest, endpoint: Endpoint) -> str:
    return request.build_absolute_uri(polling.poll_path(endpoint.pk))


def _why(endpoint: Endpoint) -> str:
    """Why the endpoint is not active, as its tenant may read it: the failures' own words,
    never who in the operator's team did it (their reasons may name them)."""
    if endpoint.state == EndpointState.ACTIVE:
        return ""
    if endpoint.state_set_by == StateSetBy.FAILURES:
        return endpoint.state_reason or "It failed too often."
    if endpoint.state_set_by == StateSetBy.TENANT:
        return "You disabled it."
    done = "suspended" if endpoint.state == EndpointState.SUSPENDED else "disabled"
    return f"It was {done} by the operator of this service."


def _endpoint_page(
    request: HttpRequest,
    tenant: str,
    endpoint: Endpoint,
    *,
    test_result: services.TestEventResult | None = None,
    status: int = 200,
    notice_key: str = "",
) -> HttpResponse:
    recent = selectors.endpoint_recent_deliveries(
        selectors.tenant_deliveries(tenant=tenant), endpoint_id=endpoint.pk
    )
    polled = endpoint.mode == EndpointMode.POLL
    # A polling endpoint's feed, or a push endpoint's catch-up feed once it has a key.
    feed = polled or bool(endpoint.poll_key_hash)
    page = _page(
        request,
        "endpoint.html",
        {
            "tenant": tenant,
            "endpoint": endpoint,
            "polled": polled,
            "recent": recent,
            "why": _why(endpoint),
            "may_enable": services.endpoint_tenant_may_enable(endpoint),
            # A suspension of the failures: a test event (sent at once), then resume.
            "may_test": endpoint.state == EndpointState.SUSPENDED
            and endpoint.state_set_by == StateSetBy.FAILURES,
            "test_result": test_result,
            "poll_url": _poll_url(request, endpoint) if feed else None,
            "consumers": polling.consumers_with_lag(endpoint_id=endpoint.pk) if feed else [],
            "polls": selectors.endpoint_recent_polls(endpoint_id=endpoint.pk) if feed else [],
        },
        notice_key=notice_key,
    )
    page.status_code = status
    return page


@require_GET
@portal_view
def endpoint_detail(request: HttpRequest, tenant: str, pk: UUID) -> HttpResponse:
    return _endpoint_page(request, tenant, _endpoint(tenant, pk))


@sensitive_post_parameters(*auth_forms.SECRET_FIELDS)
@require_http_methods(["GET", "POST"])
@portal_view
def endpoint_edit(request: HttpRequest, tenant: str, pk: UUID) -> HttpResponse:
    endpoint = _endpoint(tenant, pk)
    if request.method != "POST":
        return _endpoint_form_page(request, tenant, EndpointForm.of(endpoint), endpoint)
    form = EndpointForm.of(endpoint, request.POST)
    if form.is_valid():
        changes = form.service_fields(adding=False)
        try:
            saved = principals.endpoint_update_by(
                principal=principals.Principal(tenant=tenant), endpoint=endpoint, **changes
            )
        except (services.EndpointInvalid, principals.EndpointForbidden) as exc:
            form.add_service_errors(exc.errors)
        else:
            _note(tenant, "changed endpoint", endpoint.pk)
            notice = "saved-headers-dropped" if saved.notices else "saved"
            return _redirect("endpoint", endpoint.pk, notice=notice)
    return _endpoint_form_page(request, tenant, form, endpoint)


@require_POST
@portal_view
def endpoint_state(request: HttpRequest, tenant: str, pk: UUID) -> HttpResponse:
    endpoint = _endpoint(tenant, pk)
    wanted = request.POST.get("state")
    if wanted not in (EndpointState.DISABLED, EndpointState.ACTIVE):
        return _redirect("endpoint", endpoint.pk)
    try:
        principals.endpoint_state_by(
            principal=principals.Principal(tenant=tenant), endpoint=endpoint, state=wanted
        )
    except principals.EndpointForbidden:
        if wanted == EndpointState.DISABLED:
            return _redirect("endpoint", endpoint.pk, notice="not-disabled")
        # What an operator suspended or disabled stays so; a suspension of the
        # failures lifts after a test event that succeeded.
        refused = "test-first" if endpoint.state_set_by == StateSetBy.FAILURES else "not-enabled"
        return _endpoint_page(request, tenant, endpoint, status=403, notice_key=refused)
    done = "disabled" if wanted == EndpointState.DISABLED else "enabled"
    _note(tenant, f"{done} endpoint", endpoint.pk)
    return _redirect("endpoint", endpoint.pk, notice=done)


def _confirm(request: HttpRequest, tenant: str, **context: Any) -> HttpResponse:
    """The one confirmation page every irreversible or revealing action goes through."""
    return _page(request, "confirm.html", {"tenant": tenant, **context})


@require_http_methods(["GET", "POST"])
@portal_view
def endpoint_delete(request: HttpRequest, tenant: str, pk: UUID) -> HttpResponse:
    endpoint = _endpoint(tenant, pk)
    if request.method == "POST":
        services.endpoint_delete(endpoint_id=endpoint.pk)
        _note(tenant, "deleted endpoint", endpoint.pk)
        return _redirect("home", notice="deleted")
    return _confirm(
        request,
        tenant,
        endpoint=endpoint,
        title="Delete this endpoint?",
        question="It stops receiving webhooks, and its delivery log is deleted with it. "
        "This cannot be undone.",
        button="Delete the endpoint",
        danger=True,
    )


@sensitive_post_parameters()
@require_http_methods(["GET", "POST"])
@portal_view
def endpoint_secret(request: HttpRequest, tenant: str, pk: UUID) -> HttpResponse:
    endpoint = _endpoint(tenant, pk)
    if request.method == "POST":
        _note(tenant, "revealed the signing secret of endpoint", endpoint.pk)
        services.portal_secret_revealed(
            tenant=tenant, session_id=access.session_id(request), endpoint_id=endpoint.pk
        )
        secrets = [
            (secret.value, secret.expires_at)
            for secret in selectors.endpoint_signing_secrets(endpoint=endpoint, now=timezone.now())
        ]
        return _page(
            request,
            "secret.html",
            {"tenant": tenant, "endpoint": endpoint, "secrets": secrets, "new": False},
        )
    return _confirm(
        request,
        tenant,
        endpoint=endpoint,
        title="Reveal the signing secret?",
        question="Anyone who sees it can forge webhooks to this endpoint. Make sure nobody "
        "is looking at your screen.",
        button="Reveal the secret",
        danger=False,
    )


@sensitive_post_parameters()
@require_http_methods(["GET", "POST"])
@portal_view
def endpoint_rotate(request: HttpRequest, tenant: str, pk: UUID) -> HttpResponse:
    endpoint = _endpoint(tenant, pk)
    form = RotateForm(
        request.POST if request.method == "POST" else None,
        initial={"grace_seconds": DEFAULT_ROTATION_GRACE_SECONDS},
    )
    if request.method == "POST" and form.is_valid():
        secret, _ = services.endpoint_rotate_secret(
            endpoint=endpoint, grace_seconds=form.cleaned_data["grace_seconds"]
        )
        _note(tenant, "rotated the signing secret of endpoint", endpoint.pk)
        return _page(
            request,
            "secret.html",
            {"tenant": tenant, "endpoint": endpoint, "secrets": [(secret, None)], "new": True},
        )
    return _confirm(
        request,
        tenant,
        endpoint=endpoint,
        title="Rotate the signing secret?",
        question="A new secret signs every webhook from now on. Update your endpoint, and "
        "choose how long the current secret keeps signing too.",
        button="Rotate the secret",
        form=form,
        danger=False,
    )


@require_http_methods(["GET", "POST"])
@portal_view
def endpoint_poll_key(request: HttpRequest, tenant: str, pk: UUID) -> HttpResponse:
    """A new poll key: a polling endpoint's consumer's, or a push endpoint's catch-up key.
    Shown once, in the POST's answer; the previous key stops working at once."""
    endpoint = _endpoint(tenant, pk)
    polled = endpoint.mode == EndpointMode.POLL
    if request.method == "POST":
        key = polling.poll_key_issue(endpoint_id=endpoint.pk)
        _note(tenant, "issued a new poll key for endpoint", endpoint.pk)
        endpoint.refresh_from_db()
        return _page(
            request,
            "poll_key.html",
            {
                "tenant": tenant,
                "endpoint": endpoint,
                "polled": polled,
                "poll_key": key,
                "poll_url": _poll_url(request, endpoint),
            },
        )
    replaces = bool(endpoint.poll_key_hash)
    if polled:
        title = "Rotate the poll key?"
        question = (
            "Your consumer reads this endpoint's events with it. The current key stops "
            "working at once: give the new one to your consumer."
        )
    else:
        title = "Replace the catch-up key?" if replaces else "Get a catch-up key?"
        question = (
            "With it, your consumer reads what this endpoint was sent (whatever became of "
            "each delivery) to reconcile after an outage."
            + (" The current catch-up key stops working at once." if replaces else "")
        )
    return _confirm(
        request,
        tenant,
        endpoint=endpoint,
        title=title,
        question=question,
        button="Rotate the poll key" if polled else "Issue the catch-up key",
        danger=False,
    )


@require_POST
@portal_view
def endpoint_test(request: HttpRequest, tenant: str, pk: UUID) -> HttpResponse:
    endpoint = _endpoint(tenant, pk)
    if endpoint.state == EndpointState.SUSPENDED and endpoint.state_set_by == StateSetBy.FAILURES:
        # Nothing goes out through the sending path while it is suspended: this one
        # request goes now, and its answer decides whether the tenant may resume.
        test_result = services.endpoint_test_now(
            endpoint_id=endpoint.pk, requested_by=f"portal ({tenant})"
        )
        _note(tenant, "tested suspended endpoint", f"{endpoint.pk}: {test_result.status_code}")
        endpoint.refresh_from_db()
        return _endpoint_page(request, tenant, endpoint, test_result=test_result)
    try:
        delivery = services.endpoint_send_test_event(
            endpoint_id=endpoint.pk, requested_by=f"portal ({tenant})"
        )
    except services.EndpointNotActive:
        return _redirect("endpoint", endpoint.pk, notice="test-refused")
    _note(tenant, "sent a test event to endpoint", endpoint.pk)
    return _redirect("delivery", delivery.pk, notice="test-sent")


@require_POST
@portal_view
def endpoint_check(request: HttpRequest, tenant: str, pk: UUID) -> HttpResponse:
    """The CloudEvents handshake again (the target consents, then waiting deliveries go)."""
    endpoint = _endpoint(tenant, pk)
    try:
        services.endpoint_request_validation(endpoint_id=endpoint.pk)
    except services.ValidationUnavailable:
        return _redirect("endpoint", endpoint.pk)
    except services.ValidationFolded:
        return _redirect("endpoint", endpoint.pk, notice="validation-recent")
    _note(tenant, "asked for the consent of endpoint", endpoint.pk)
    return _redirect("endpoint", endpoint.pk, notice="validation-asked")


# --- deliveries ------------------------------------------------------------------------


@require_GET
@portal_view
def delivery_list(request: HttpRequest, tenant: str) -> HttpResponse:
    endpoints = list(selectors.tenant_endpoints(tenant=tenant))
    filters = DeliveryFilterForm(request.GET or None, endpoints=endpoints)
    deliveries = selectors.tenant_deliveries(tenant=tenant).select_related("event", "endpoint")
    if filters.is_valid():
        wanted = filters.cleaned_data
        # The form's "any" is blank: not a filter.
        deliveries = selectors.deliveries_filtered(
            deliveries,
            status=wanted["status"] or None,
            endpoint_id=wanted["endpoint"] or None,
            event_type=wanted["event_type"] or None,
            since=wanted["since"] or None,
        )
    page = Paginator(deliveries.order_by("-created_at", "-id"), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    keep = request.GET.copy()
    keep.pop("page", None)
    keep.pop("notice", None)
    return _page(
        request,
        "deliveries.html",
        {"tenant": tenant, "filters": filters, "page": page, "query": keep.urlencode()},
    )


@require_GET
@portal_view
def delivery_detail(request: HttpRequest, tenant: str, pk: int) -> HttpResponse:
    delivery = get_object_or_404(
        selectors.delivery_details(selectors.tenant_deliveries(tenant=tenant)), pk=pk
    )
    attempts = [
        {
            "number": attempt.number,
            "started_at": attempt.started_at,
            "status": attempt.response_status,
            "duration_ms": round(attempt.duration_ms),
            "excerpt": attempt.response_body[:RESPONSE_EXCERPT],
            "error": attempt.error,
        }
        for attempt in delivery.attempt_set.all()
    ]
    retryable = delivery.status in (DeliveryStatus.DEAD_LETTERED, DeliveryStatus.CANCELLED)
    try:
        # What this endpoint receives: its pinned version of the data.
        version, data = versioned_payload(delivery.event, delivery.endpoint)
        payload: str | None = json.dumps(
            {"version": version, "data": data}, indent=2, ensure_ascii=False
        )
    except payloads.PayloadUnavailable:
        payload = None
    return _page(
        request,
        "delivery.html",
        {
            "tenant": tenant,
            "delivery": delivery,
            "attempts": attempts,
            "retryable": retryable,
            "payload": payload,
        },
    )


@require_POST
@portal_view
def delivery_retry(request: HttpRequest, tenant: str, pk: int) -> HttpResponse:
    delivery = get_object_or_404(selectors.tenant_deliveries(tenant=tenant), pk=pk)
    try:
        services.delivery_retry(delivery_id=delivery.pk)
    except services.DeliveryNotRetryable:
        return _redirect("delivery", delivery.pk, notice="not-retried")
    _note(tenant, "retried delivery", delivery.pk)
    return _redirect("delivery", delivery.pk, notice="retried")


@require_http_methods(["GET", "POST"])
@portal_view
def recover(request: HttpRequest, tenant: str) -> HttpResponse:
    """Send again what failed since a time: a preview of how many, then a confirmation."""
    endpoints = list(selectors.tenant_endpoints(tenant=tenant))
    form = RecoverForm(request.POST if request.method == "POST" else None, endpoints=endpoints)
    context: dict[str, Any] = {"tenant": tenant, "form": form}
    if request.method == "POST" and form.is_valid():
        since = form.cleaned_data["since"]
        endpoint_id = UUID(form.cleaned_data["endpoint"]) if form.cleaned_data["endpoint"] else None
        if "confirm" in request.POST:
            queued = services.deliveries_recover(
                tenant=tenant, since=since, endpoint_id=endpoint_id
            )
            context["queued"] = queued
            _note(tenant, "recovered failed deliveries since", f"{since.isoformat()}: {queued}")
        else:
            context["preview"] = selectors.failed_deliveries(
                tenant=tenant, since=since, endpoint_id=endpoint_id
            ).count()
    return _page(request, "recover.html", context)


# --- the catalogue ---------------------------------------------------------------------


@require_GET
@portal_view
def event_types(request: HttpRequest, tenant: str) -> HttpResponse:
    return _page(request, "event_types.html", {"tenant": tenant, "event_types": _catalogue()})
