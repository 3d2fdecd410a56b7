"""The endpoint URL as a form field (admin, portal): an http(s) URL as Django's
`forms.URLField` reads it, or a broker URL left as typed for the service to judge
(`broker_urls`; `forms.URLField` refuses any scheme but http, https, ftp and ftps)."""

from typing import Any

from django import forms

from deliveries.destinations import broker_urls


class EndpointURLFormField(forms.URLField):
    def to_python(self, value: Any) -> str:
        text = value.strip() if isinstance(value, str) else value
        if isinstance(text, str) and broker_urls.is_broker_url(text):
            return text
        return str(super().to_python(value))

    def run_validators(self, value: Any) -> None:
        if isinstance(value, str) and broker_urls.is_broker_url(value):
            return
        super().run_validators(value)
