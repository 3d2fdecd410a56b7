import pytest

from receivers.handlers import HandlerRegistry


def handler_a(event: object) -> None: ...


def handler_b(event: object) -> None: ...


def handler_c(event: object) -> None: ...


def test_exact_type_beats_prefix_and_source_specific_beats_general() -> None:
    registry = HandlerRegistry()
    registry.register("payment.*", handler_a)
    registry.register("payment.succeeded", handler_b)
    registry.register("payment.succeeded", handler_c, sources=["shop"])

    assert registry.resolve("other", "payment.succeeded") is handler_b
    assert registry.resolve("shop", "payment.succeeded") is handler_c
    assert registry.resolve("other", "payment.failed") is handler_a
    assert registry.resolve("other", "invoice.paid") is None


def test_second_handler_for_the_same_type_is_refused() -> None:
    registry = HandlerRegistry()
    registry.register("a.b", handler_a)
    registry.register("a.b", handler_a)  # the same function again is fine (re-import)
    with pytest.raises(ValueError, match="exists"):
        registry.register("a.b", handler_b)


def test_bad_pattern_is_refused() -> None:
    with pytest.raises(ValueError, match="pattern"):
        HandlerRegistry().register("payment*", handler_a)


def test_example_handlers_are_registered_at_startup() -> None:
    from receivers.handlers import registry

    assert registry.resolve("any", "payment.succeeded") is not None
    assert registry.resolve("any", "future.event") is None
