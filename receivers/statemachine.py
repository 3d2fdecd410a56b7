"""A small state machine that refuses invalid transitions. Pure.

Out-of-order delivery is the normal case for webhooks: an old ``payment.processing`` may
arrive after ``payment.succeeded``. Asking "is this transition allowed from the current
state?" keeps such an event from undoing a later state, without knowing the global order.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


class InvalidTransition(Exception):
    def __init__(self, current: str, target: str) -> None:
        super().__init__(f"transition {current!r} -> {target!r} is not allowed")
        self.current = current
        self.target = target


@dataclass(frozen=True)
class StateMachine:
    transitions: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, transitions: Mapping[str, Iterable[str]]) -> "StateMachine":
        return cls({state: frozenset(targets) for state, targets in transitions.items()})

    def can(self, current: str, target: str) -> bool:
        return target in self.transitions.get(current, frozenset())

    def check(self, current: str, target: str) -> bool:
        """True if the transition is to be applied, False if ``target`` is already the
        state (a repeat: nothing to do); raises ``InvalidTransition`` otherwise."""
        if current == target:
            return False
        if not self.can(current, target):
            raise InvalidTransition(current, target)
        return True

    def is_final(self, state: str) -> bool:
        return not self.transitions.get(state)
