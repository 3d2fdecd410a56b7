"""Scraping /metrics the way Prometheus does, and reading values out of the answer."""

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

METRICS_TOKEN = "metrics-test-token-0123456789"


def scrape(client: Client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)
