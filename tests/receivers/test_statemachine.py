import pytest

from receivers.statemachine import InvalidTransition, StateMachine

MACHINE = StateMachine.of({"pending": {"paid", "cancelled"}, "paid": {"refunded"}})


def test_allowed_transition_is_applied() -> None:
    assert MACHINE.check("pending", "paid") is True


def test_same_state_is_a_repeat_not_an_error() -> None:
    assert MACHINE.check("paid", "paid") is False


def test_old_event_cannot_undo_a_later_state() -> None:
    with pytest.raises(InvalidTransition):
        MACHINE.check("paid", "pending")
    with pytest.raises(InvalidTransition):
        MACHINE.check("paid", "cancelled")


def test_final_states() -> None:
    assert MACHINE.is_final("refunded")
    assert not MACHINE.is_final("pending")
