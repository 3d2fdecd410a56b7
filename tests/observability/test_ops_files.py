"""The example alerting rules are valid YAML in Prometheus's shape and only name metrics
that /metrics exports."""

import re
from pathlib import Path

import pytest
import yaml
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from pytest_django.fixtures import Settings

RULES = Path(__file__).resolve().parents[2] / "ops" / "prometheus-rules.yml"
METRIC_NAME = re.compile(r"\b((?:webhooks|receivers)_[a-z0-9_]+)")
SUFFIXES = ("", "_total", "_bucket", "_count", "_sum")


def exported_names(client: Client) -> set[str]:
    body = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    return {
        family.name + suffix
        for family in text_string_to_metric_families(body)
        for suffix in SUFFIXES
    }


@pytest.mark.django_db
def test_alert_rules_are_well_formed_and_use_exported_metrics(
    client: Client, settings: Settings
) -> None:
    settings.METRICS_TOKEN = "t"
    document = yaml.safe_load(RULES.read_text())
    rules = [rule for group in document["groups"] for rule in group["rules"]]
    names = exported_names(client)

    assert {group["name"] for group in document["groups"]} == {
        "webhooks-sending",
        "webhooks-receiving",
    }
    assert len({rule["alert"] for rule in rules}) == len(rules)
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}
        assert rule["annotations"]["summary"]
        assert re.fullmatch(r"\d+[smh]", rule.get("for", "0m")), rule
        used = set(METRIC_NAME.findall(rule["expr"]))
        assert used, rule["alert"]
        assert used <= names, (rule["alert"], used - names)
    # The alerts an operator needs: dead letters, an old backlog, signature failures,
    # suspended endpoints and no success at all.
    exprs = " ".join(rule["expr"] for rule in rules)
    for needed in (
        'outcome="dead_lettered"',
        "webhooks_oldest_pending_delivery_age_seconds",
        "signature_failed",
        "webhooks_suspended_endpoints",
        'outcome="succeeded"',
    ):
        assert needed in exprs
