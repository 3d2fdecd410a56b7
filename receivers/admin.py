"""Operator console of the receiving side; actions call services."""

import contextlib
import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.utils.translation import ngettext
from django.views.decorators.debug import sensitive_post_parameters

from receivers import schemes, selectors, services
from receivers.models import InboxEvent, InboxStatus, Source, SourceSecret
from webhooks_core.web.secrets_page import ShownSecret, secrets_page


class SourceSecretForm(forms.ModelForm[SourceSecret]):
    secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="The provider's signing secret. Stored encrypted, never shown again.",
    )

    class Meta:
        model = SourceSecret
        fields = ["secret", "expires_at"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.instance.pk is None and not cleaned.get("secret"):
            raise forms.ValidationError("Enter the secret.")
        scheme = self._scheme()
        if cleaned.get("secret") and scheme in schemes.SCHEMES:
            problem = schemes.secret_refusal(schemes.get(scheme), cleaned["secret"])
            if problem:
                self.add_error("secret", problem)
        return cleaned

    def _scheme(self) -> str:
        # The inline formset sets the (possibly unsaved) parent source on the instance.
        try:
            return self.instance.source.scheme
        except Source.DoesNotExist:
            return ""

    def save(self, commit: bool = True) -> SourceSecret:
        if self.cleaned_data.get("secret"):
            self.instance.value = self.cleaned_data["secret"]
        return super().save(commit)


class SourceSecretInline(admin.TabularInline[SourceSecret, Source]):
    model = SourceSecret
    form = SourceSecretForm
    extra = 0
    readonly_fields = ["fingerprint", "created_at"]
    fields = ["fingerprint", "secret", "created_at", "expires_at"]


class SourceForm(forms.ModelForm[Source]):
    """Translates the admin's fields for `source_create` / `source_update`, which own the
    rules; their refusals come back as this form's field errors."""

    # A callable: the registry (RECEIVERS_SCHEMES included) is read for each form.
    scheme = forms.ChoiceField(choices=schemes.choices)

    api_base_url = forms.URLField(required=False, max_length=2048, assume_scheme="https")
    public_url = forms.URLField(
        required=False,
        max_length=2048,
        assume_scheme="https",
        help_text=Source._meta.get_field("public_url").help_text,
    )
    api_token = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Token for the provider's API (reconciliation). Leave empty to keep it.",
    )

    class Meta:
        model = Source
        fields = [
            "slug",
            "scheme",
            "description",
            "enabled",
            "tolerance_seconds",
            "max_body_bytes",
            "expected_account",
            "expected_mode",
            "public_url",
            "api_base_url",
            "api_token",
        ]

    def service_fields(self) -> dict[str, Any]:
        names = [n for n in self.fields if n in services.sources.EDITABLE or n == "secret"]
        if not self.instance._state.adding:
            names = [n for n in names if n in self.changed_data]
        return {n: self.cleaned_data[n] for n in names if n in self.cleaned_data}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        try:
            services.source_validate(
                source=None if self.instance._state.adding else self.instance,
                **self.service_fields(),
            )
        except services.SourceInvalid as exc:
            for field, problems in exc.errors.items():
                self.add_error(field if field in self.fields else None, problems)
        return cleaned

    def _post_clean(self) -> None:
        # The services validate and write; the instance is not the source of truth here.
        pass


class SourceAddForm(SourceForm):
    """The add page, like `contrib.auth`'s: the first secret is part of it."""

    secret = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="The provider's signing secret. Leave empty to generate one (our scheme "
        "and Standard Webhooks only): it is shown once, on the next page.",
    )

    class Meta(SourceForm.Meta):
        fields = [*SourceForm.Meta.fields[:2], "secret", *SourceForm.Meta.fields[2:]]


class RotateSecretForm(forms.Form):
    secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="The provider's new secret. Leave empty to generate one (our scheme and "
        "Standard Webhooks only).",
    )
    grace_hours = forms.FloatField(
        min_value=0,
        max_value=30 * 24,
        initial=24,
        help_text="How long the current secrets keep verifying (0: retire them now).",
    )


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin[Source]):
    form = SourceForm
    add_form = SourceAddForm
    list_display = ["slug", "scheme", "enabled", "tolerance_seconds", "max_body_bytes"]
    list_filter = ["scheme", "enabled"]
    search_fields = ["slug", "description"]
    readonly_fields = ["created_at", "updated_at", "rotate_link"]
    inlines = [SourceSecretInline]
    actions = ["rotate_secret"]

    delete_confirmation_template = "admin/receivers/source/delete_confirmation.html"

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        # A source is deleted from its own page, where the unprocessed events are counted
        # and must be confirmed: no bulk deletion that would skip that.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """What the confirmation page lists: counts from the selector, not every inbox row
        (Django's default walks them all), and the host's rows that protect the source."""
        deleted: list[Any] = []
        counts: dict[str, int] = {}
        protected: list[str] = []
        for source in objs:
            preview = selectors.source_deletion_preview(source=source)
            # unordered_list's shape: an item, then the list of what goes with it.
            deleted += [
                f"Source: {source.slug}",
                [
                    f"{preview.secrets} secret(s)",
                    f"{preview.inbox_events} inbox event(s), {preview.unfinished} of "
                    "them not processed",
                ],
            ]
            counts["sources"] = counts.get("sources", 0) + 1
            counts["inbox events"] = counts.get("inbox events", 0) + preview.inbox_events
            protected += [f"{n} {label} row(s)" for label, n in preview.referring.items()]
        return deleted, counts, set(), protected

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        source = self.get_object(request, unquote(object_id))
        extra = dict(extra_context or {})
        if source is not None:
            extra["unfinished"] = selectors.unfinished_inbox_events(source_id=source.pk)
        try:
            return super().delete_view(request, object_id, extra)
        except services.SourceInUse as exc:
            # Unprocessed events and no "force" (or some arrived since the page was shown).
            self.message_user(request, str(exc), messages.ERROR)
            return HttpResponseRedirect(request.path)

    def delete_model(self, request: HttpRequest, obj: Source) -> None:
        force = request.POST.get("force") == "on"
        # Deleted meanwhile by another request: what was asked is done.
        with contextlib.suppress(Source.DoesNotExist):
            services.source_delete(source_id=obj.pk, force=force)

    def get_form(
        self, request: HttpRequest, obj: Source | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is None:
            kwargs["form"] = self.add_form
        return super().get_form(request, obj, change, **kwargs)

    def get_inlines(self, request: HttpRequest, obj: Source | None) -> list[Any]:
        # On the add page the first secret is a field of the form (see SourceAddForm).
        return [] if obj is None else list(self.inlines)

    def get_fields(self, request: HttpRequest, obj: Source | None = None) -> Any:
        fields = list(super().get_fields(request, obj))
        if obj is not None and not self.has_change_permission(request, obj):
            # A view-only page shows whether a token is set, never the token.
            fields = ["api_token_set" if f == "api_token" else f for f in fields]
        return fields

    def get_readonly_fields(self, request: HttpRequest, obj: Source | None = None) -> Any:
        return [*super().get_readonly_fields(request, obj), "api_token_set"]

    @admin.display(description="API token")
    def api_token_set(self, obj: Source) -> str:
        return "set (stored encrypted)" if obj.encrypted_api_token else "not set"

    @method_decorator(sensitive_post_parameters())
    def changeform_view(self, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().changeform_view(*args, **kwargs)

    def save_model(self, request: HttpRequest, obj: Source, form: Any, change: bool) -> None:
        fields = form.service_fields()
        if change:
            saved = services.source_update(source=obj, **fields)
            for notice in saved.notices:
                self.message_user(request, notice, messages.WARNING)
        else:
            given = fields.pop("secret", "") or None
            saved, secret = services.source_create(
                slug=fields.pop("slug"), scheme=fields.pop("scheme"), secret=given, **fields
            )
            if given is None:
                # For response_add, in this request only: shown once on its own page.
                request._new_source_secret = secret  # type: ignore[attr-defined]
        obj.__dict__.update(saved.__dict__)

    def response_add(
        self, request: HttpRequest, obj: Source, post_url_continue: str | None = None
    ) -> HttpResponse:
        secret = getattr(request, "_new_source_secret", None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        return self._secrets_page(
            request, obj, [secret], title=f"Source {obj.slug} added: its secret", grace=None
        )

    def _secrets_page(
        self,
        request: HttpRequest,
        source: Source,
        new_secrets: list[str],
        *,
        title: str,
        grace: int | None,
        back_to_list: bool = False,
    ) -> HttpResponse:
        change_url = reverse("admin:receivers_source_change", args=[source.pk])
        return secrets_page(
            request,
            self.admin_site,
            self.opts,
            title=title,
            rows=[ShownSecret(label=source.slug, secret=s, url=change_url) for s in new_secrets],
            note="Copy it now and give it to the sender; it is not shown again.",
            back_url=reverse("admin:receivers_source_changelist") if back_to_list else change_url,
            back_label="Back to sources" if back_to_list else f"Back to {source.slug}",
            subject_label="source",
            grace_seconds=grace,
        )

    def get_urls(self) -> list[URLPattern]:
        rotate = path(
            "<int:source_id>/rotate-secret/",
            self.admin_site.admin_view(self.rotate_secret_view),
            name="receivers_source_rotate_secret",
        )
        return [rotate, *super().get_urls()]

    @admin.display(description="Secret rotation")
    def rotate_link(self, obj: Source) -> str:
        if obj.pk is None:
            return "-"
        url = reverse("admin:receivers_source_rotate_secret", args=[obj.pk])
        return format_html('<a href="{}">Rotate secret…</a>', url)

    @method_decorator(sensitive_post_parameters())
    def rotate_secret_view(self, request: HttpRequest, source_id: int) -> HttpResponse:
        """Add the provider's new secret (or a generated one) with a grace window for the
        current ones: a rotation without downtime, in one step."""
        source = get_object_or_404(Source, pk=source_id)
        if not self.has_change_permission(request, source):
            raise PermissionDenied
        form = RotateSecretForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                secret, _ = services.source_rotate_secret(
                    source=source,
                    secret=form.cleaned_data["secret"] or None,
                    grace_seconds=round(form.cleaned_data["grace_hours"] * 3600),
                )
            except (services.SecretRequired, services.InvalidSecret) as exc:
                form.add_error("secret", str(exc))
            else:
                if not form.cleaned_data["secret"]:
                    return self._secrets_page(
                        request,
                        source,
                        [secret],
                        title=f"New secret of {source.slug}",
                        grace=round(form.cleaned_data["grace_hours"] * 3600),
                    )
                self.message_user(request, f"{source.slug}: new secret added.")
                change_url = reverse("admin:receivers_source_change", args=[source.pk])
                return HttpResponseRedirect(change_url)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Rotate the secret of {source.slug}",
            "opts": self.opts,
            "original": source,
            "form": form,
        }
        return TemplateResponse(request, "admin/receivers/source/rotate_secret.html", context)

    @admin.action(
        description="Rotate secret (generate a new one, old valid 24 h)", permissions=["change"]
    )
    def rotate_secret(
        self, request: HttpRequest, queryset: QuerySet[Source]
    ) -> HttpResponse | None:
        rows = []
        for source in queryset:
            try:
                secret, _ = services.source_rotate_secret(source=source)
            except services.SecretRequired as exc:
                self.message_user(request, f"{source.slug}: {exc}; add it below.", messages.ERROR)
                continue
            change_url = reverse("admin:receivers_source_change", args=[source.pk])
            rows.append(ShownSecret(label=source.slug, secret=secret, url=change_url))
        if not rows:
            return None
        return secrets_page(
            request,
            self.admin_site,
            self.opts,
            title="New source secrets",
            rows=rows,
            note="Copy them now and give them to the senders; they are not shown again.",
            back_url=reverse("admin:receivers_source_changelist"),
            back_label="Back to sources",
            subject_label="source",
            grace_seconds=services.sources.DEFAULT_ROTATION_GRACE_SECONDS,
        )


@admin.register(InboxEvent)
class InboxEventAdmin(admin.ModelAdmin[InboxEvent]):
    list_display = ["received_at", "source", "type", "event_id", "status", "attempts"]
    list_filter = ["source", "status", "type"]
    list_select_related = ["source"]
    search_fields = ["event_id", "type"]
    date_hierarchy = "received_at"
    actions = ["retry_processing"]
    exclude = ["raw_body", "payload", "lease_token"]
    readonly_fields = [
        "source",
        "event_id",
        "type",
        "status",
        "attempts",
        "attempts_before_cycle",
        "received_at",
        "provider_timestamp",
        "processed_at",
        "next_attempt_at",
        "dispatched_at",
        "lease_expires_at",
        "last_error",
        "last_traceback",
        "headers",
        "pretty_payload",
        "raw_body_size",
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[InboxEvent]:
        queryset = super().get_queryset(request)
        url_name = request.resolver_match.url_name if request.resolver_match else None
        if url_name and url_name.endswith("changelist"):
            queryset = queryset.defer("raw_body", "payload", "headers", "last_traceback")
        return queryset

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="Payload")
    def pretty_payload(self, obj: InboxEvent) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.payload, indent=2, ensure_ascii=False))

    @admin.display(description="Raw body")
    def raw_body_size(self, obj: InboxEvent) -> str:
        if obj.raw_body is None:
            return "purged (retention)"
        return f"{len(bytes(obj.raw_body))} bytes"

    @admin.action(description="Retry processing", permissions=["change"])
    def retry_processing(self, request: HttpRequest, queryset: QuerySet[InboxEvent]) -> None:
        retried = skipped = 0
        for pk in queryset.exclude(status=InboxStatus.PROCESSING).values_list("pk", flat=True):
            try:
                services.inbox_retry(inbox_id=pk)
                retried += 1
            except services.InboxNotRetryable:
                skipped += 1
        skipped += queryset.filter(status=InboxStatus.PROCESSING).count()
        message = ngettext(
            "%(count)d event queued for processing.",
            "%(count)d events queued for processing.",
            retried,
        ) % {"count": retried}
        if skipped:
            message += f" {skipped} being processed right now left alone."
        self.message_user(request, message, messages.SUCCESS)
