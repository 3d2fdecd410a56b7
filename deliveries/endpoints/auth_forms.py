"""Delivery-auth fields of the admin's and the portal's endpoint forms. They only
translate input into what `endpoints.auth` takes (its rules decide); the secrets
(client secret, client key) are write-only: never an initial value, never rendered back,
left empty to keep what is stored."""

from typing import Any

from django import forms

from deliveries.destinations.http_client.oauth2 import AUTH_TYPE
from deliveries.endpoints.field_rules import TLS_FIELDS
from deliveries.models import Endpoint

OAUTH2_FIELDS = (
    "auth_type",
    "oauth2_token_url",
    "oauth2_client_id",
    "oauth2_client_secret",
    "oauth2_scope",
    "oauth2_audience",
)
#: Form fields whose values are secrets (`sensitive_post_parameters`).
SECRET_FIELDS = ("oauth2_client_secret", "client_key")
PEM_WIDGET = {"rows": 4, "cols": 64, "spellcheck": "false", "autocomplete": "off"}
KEEP = "Leave empty to keep the stored one."


class DeliveryAuthFields(forms.Form):
    """Mixed into an endpoint form (a Form or a ModelForm)."""

    auth_type = forms.ChoiceField(
        label="Delivery auth",
        required=False,
        choices=[("", "None (the signature only)"), (AUTH_TYPE, "OAuth2 client credentials")],
        help_text="OAuth2: every request carries an Authorization: Bearer header with a token "
        "fetched from the token URL and shared until shortly before it expires.",
    )
    oauth2_token_url = forms.CharField(label="OAuth2 token URL", required=False, max_length=2048)
    oauth2_client_id = forms.CharField(label="OAuth2 client ID", required=False, max_length=2048)
    oauth2_client_secret = forms.CharField(
        label="OAuth2 client secret",
        required=False,
        max_length=2048,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=f"Write-only, stored encrypted. {KEEP}",
    )
    oauth2_scope = forms.CharField(label="OAuth2 scope", required=False, max_length=2048)
    oauth2_audience = forms.CharField(label="OAuth2 audience", required=False, max_length=2048)
    client_certificate = forms.CharField(
        label="Client certificate (mutual TLS)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs=PEM_WIDGET),
        help_text="PEM, its chain after it. Empty: no client certificate (removes the key).",
    )
    client_key = forms.CharField(
        label="Client key (mutual TLS)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs=PEM_WIDGET),
        help_text=f"PEM, not encrypted. Write-only, stored encrypted. {KEEP}",
    )
    ca_certificates = forms.CharField(
        label="CA certificates (mutual TLS)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs=PEM_WIDGET),
        help_text="PEM. Given: these CAs, and no others, are trusted for this endpoint's "
        "server certificate (a private CA). Empty: the system CAs.",
    )


def initial_of(endpoint: Endpoint | None) -> dict[str, Any]:
    """The auth fields' initial values: never a secret."""
    if endpoint is None or endpoint._state.adding:
        return {}
    auth = endpoint.auth or {}
    return {
        "auth_type": auth.get("type", ""),
        "oauth2_token_url": auth.get("token_url", ""),
        "oauth2_client_id": auth.get("client_id", ""),
        "oauth2_scope": auth.get("scope", ""),
        "oauth2_audience": auth.get("audience", ""),
        "client_certificate": endpoint.client_certificate,
        "ca_certificates": endpoint.ca_certificates,
    }


def service_changes(form: forms.Form, *, adding: bool) -> dict[str, Any]:
    """What the services take from the auth fields: on add whatever is set, on a change
    only what changed (an empty secret field keeps the stored secret)."""
    data = form.cleaned_data
    changed = set(form.changed_data)
    changes: dict[str, Any] = {}
    if adding or changed & set(OAUTH2_FIELDS):
        if data.get("auth_type"):
            changes["auth"] = {
                "type": data["auth_type"],
                "token_url": data.get("oauth2_token_url", ""),
                "client_id": data.get("oauth2_client_id", ""),
                "client_secret": data.get("oauth2_client_secret") or None,
                "scope": data.get("oauth2_scope", ""),
                "audience": data.get("oauth2_audience", ""),
            }
        elif not adding:
            changes["auth"] = None
    for name in TLS_FIELDS:
        value = data.get(name) or ""
        if name == "client_key" and not value:
            continue  # empty: keep the stored key
        if (adding and value) or (not adding and name in changed):
            changes[name] = value
    return changes
