from receivers.timestamps import within_window


def test_inside_the_window_in_both_directions() -> None:
    assert within_window(1000, now=1300, tolerance_seconds=300)
    assert within_window(1300, now=1000, tolerance_seconds=300)


def test_outside_the_window_is_refused() -> None:
    assert not within_window(1000, now=1301, tolerance_seconds=300)
    assert not within_window(1301, now=1000, tolerance_seconds=300)


def test_negative_tolerance_refuses_everything() -> None:
    assert not within_window(1000, now=1000, tolerance_seconds=-1)
