"""The settings registry and its typed views: each entry written once, read through exactly
one view, every view read once per process and again after a setting changed."""

from typing import Any

import pytest
from django.test import override_settings
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries import conf as deliveries_conf
from receivers import conf as receivers_conf
from webhooks_core import conf

ACCESSOR_MODULES = (conf, deliveries_conf, receivers_conf)
#: Entries whose parser derives the value from more than the setting (ALLOWED_HOSTS, the
#: broker's URL) or keeps it as given for a system check to judge.
DERIVED = {"WEBHOOKS_VALIDATION_ORIGIN", "WEBHOOKS_HEALTH_REDIS_URL", "RECEIVERS_SCHEMES"}


def view_entries() -> list[tuple[type[conf.View], str, conf.Setting[Any]]]:
    return [
        (view, attribute, entry)
        for view in conf.ACCESSORS
        for attribute, entry in view.entries().items()
    ]


def another_value(entry: conf.Setting[Any]) -> object:
    default = entry.default
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return default + 3
    if isinstance(default, tuple):
        return ("10.9.0.0/16",)
    return "something-else"


def test_every_registry_entry_is_read_through_exactly_one_view_and_back() -> None:
    by_name: dict[str, list[type[conf.View]]] = {}
    for view, _, entry in view_entries():
        by_name.setdefault(entry.name, []).append(view)
    assert {name: views for name, views in by_name.items() if len(views) != 1} == {}

    registry = conf.all_settings()
    assert len({entry.name for entry in registry}) == len(registry)
    assert {entry.name for entry in registry} == set(by_name)
    # The documented entry is the view's own object, not a copy of its name and default.
    on_views = {id(entry) for _, _, entry in view_entries()}
    assert all(id(entry) in on_views for entry in registry)
    for module in ACCESSOR_MODULES:
        declared = [v for v in conf.ACCESSORS if v.__module__ == module.__name__]
        assert conf.settings_of(*declared) == module.SETTINGS, module.__name__


def test_a_view_declares_its_settings_and_nothing_else() -> None:
    # No dataclass field, annotation or class constant that could carry a second default.
    for view in conf.ACCESSORS:
        own = {
            name
            for name, value in vars(view).items()
            if not name.startswith("__") and not isinstance(value, conf.Setting)
        }
        assert own == set(), view
        assert not vars(view).get("__annotations__"), view


def test_the_views_take_their_defaults_from_the_registry(settings: SettingsWrapper) -> None:
    for entry in conf.all_settings():
        if hasattr(settings, entry.name):
            delattr(settings, entry.name)
    settings.DEBUG = False  # a setting changed: the views are made again
    for view, attribute, entry in view_entries():
        current = conf.ACCESSORS[view]()
        assert isinstance(current, view)
        if entry.name in DERIVED:
            continue
        expected = tuple(entry.default) if isinstance(entry.default, list) else entry.default
        assert getattr(current, attribute) == expected, entry.name


@pytest.mark.parametrize("view", list(conf.ACCESSORS), ids=lambda v: v.__name__)
def test_a_view_is_made_once_per_process_and_again_after_a_setting_changed(
    view: type[conf.View],
) -> None:
    accessor = conf.ACCESSORS[view]
    first = accessor()
    assert accessor() is first
    for attribute, entry in view.entries().items():
        if entry.name in DERIVED:
            continue
        changed = another_value(entry)
        with override_settings(**{entry.name: changed}):
            current = accessor()
            assert current is not first
            assert getattr(current, attribute) == changed, entry.name
            assert accessor() is current
        assert getattr(accessor(), attribute) == getattr(first, attribute)


def test_bounds_and_parsers_apply_to_the_hosts_values(settings: SettingsWrapper) -> None:
    settings.WEBHOOKS_RESPONSE_BODY_LIMIT_BYTES = -5
    settings.WEBHOOKS_VALIDATION_MIN_INTERVAL_SECONDS = 0.2
    settings.WEBHOOKS_EVENT_TYPE_MODULES = ["a.b"]
    settings.WEBHOOKS_LEASE_SECONDS = 7
    assert deliveries_conf.get().response_body_limit == 0
    assert deliveries_conf.validation().min_interval_seconds == 1.0
    assert deliveries_conf.get().event_type_modules == ("a.b",)
    lease = deliveries_conf.get().lease_seconds
    assert lease == 7.0
    assert isinstance(lease, float)


def test_a_text_setting_left_empty_takes_its_default(settings: SettingsWrapper) -> None:
    # A variable set to nothing in the environment is not set.
    settings.WEBHOOKS_PAYLOAD_STORAGE = ""
    settings.WEBHOOKS_PORTAL_ENDPOINT_VALIDATION = ""
    settings.WEBHOOKS_CLOUDEVENTS_SOURCE = ""
    assert deliveries_conf.get().payload_storage == "default"
    assert deliveries_conf.validation().portal_default == "none"
    assert deliveries_conf.get().cloudevents_source == "/webhooks"


def test_a_view_is_read_only() -> None:
    with pytest.raises(AttributeError):
        deliveries_conf.get().lease_seconds = 1.0
