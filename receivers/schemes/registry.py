"""The schemes a source may name: the built-in ones and the host's own (``RECEIVERS_SCHEMES``).

An open set, like Django's authentication backends: a host lists dotted paths to its
`Scheme` subclasses and sources may name them at once, without a migration
(``Source.scheme`` is checked against this registry, not against database choices).

A setting that names nothing usable never breaks an import: the bad entry is left out and
the system check ``receivers.E004`` says what is wrong (``manage.py check``, and before
every ``runserver`` or ``migrate``).
"""

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from django.utils.module_loading import import_string

from receivers import conf
from receivers.schemes.base import Scheme
from receivers.schemes.github import GitHubScheme
from receivers.schemes.ours import OursScheme
from receivers.schemes.paddle import PaddleScheme
from receivers.schemes.sendgrid import SendGridScheme
from receivers.schemes.shopify import ShopifyScheme
from receivers.schemes.slack import SlackScheme
from receivers.schemes.square import SquareScheme
from receivers.schemes.standard import StandardScheme
from receivers.schemes.stripe import StripeScheme
from receivers.schemes.twilio import TwilioScheme

BUILT_IN: tuple[type[Scheme], ...] = (
    OursScheme,
    StandardScheme,
    StripeScheme,
    GitHubScheme,
    SlackScheme,
    TwilioScheme,
    ShopifyScheme,
    PaddleScheme,
    SquareScheme,
    SendGridScheme,
)
#: A scheme's name is stored on its sources and shown in URLs of the admin and in metric
#: labels: short, lower case, no spaces (the length of ``Source.scheme``).
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,49}$")


@dataclass(frozen=True)
class Loaded:
    schemes: Mapping[str, Scheme]
    problems: tuple[str, ...]


def registered() -> Loaded:
    """The registry for the current ``RECEIVERS_SCHEMES`` (loaded once per value)."""
    paths = conf.value("RECEIVERS_SCHEMES")
    if isinstance(paths, str) or not isinstance(paths, Sequence):
        return _load(None)
    return _load(tuple(paths))


@lru_cache(maxsize=4)
def _load(paths: tuple[object, ...] | None) -> Loaded:
    schemes: dict[str, Scheme] = {cls.name: cls() for cls in BUILT_IN}
    problems: list[str] = []
    if paths is None:
        problems.append("RECEIVERS_SCHEMES must be a list of dotted paths to Scheme classes.")
        paths = ()
    for path in paths:
        problem = _add(schemes, path)
        if problem:
            problems.append(f"In RECEIVERS_SCHEMES, {path!r} {problem}.")
    return Loaded(schemes=schemes, problems=tuple(problems))


def _add(schemes: dict[str, Scheme], path: object) -> str | None:
    """Register the scheme at ``path``; why not, if it cannot be."""
    if not isinstance(path, str) or not path:
        return "is not a dotted path"
    try:
        found = import_string(path)
    except ImportError as exc:
        return f"cannot be imported ({exc})"
    except Exception as exc:  # the module itself fails: say so instead of crashing start-up
        return f"cannot be imported: importing it raised {type(exc).__name__}: {exc}"
    if not isinstance(found, type) or not issubclass(found, Scheme):
        return "is not a subclass of receivers.schemes.Scheme"
    name = getattr(found, "name", None)
    if not isinstance(name, str) or not NAME.match(name):
        return (
            f"has no usable name ({name!r}): set the class attribute `name` to 1-50 lower-case "
            "letters, digits, '-' or '_'"
        )
    if name in schemes:
        taken = type(schemes[name])
        return f"is named {name!r}, which {taken.__module__}.{taken.__qualname__} already is"
    try:
        schemes[name] = found()
    except Exception as exc:
        return f"cannot be instantiated without arguments ({type(exc).__name__}: {exc})"
    return None


class Registry(Mapping[str, Scheme]):
    """``name -> Scheme`` for every registered scheme, read anew on each access."""

    def __getitem__(self, name: str) -> Scheme:
        return registered().schemes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(registered().schemes)

    def __len__(self) -> int:
        return len(registered().schemes)


def choices() -> list[tuple[str, str]]:
    """(name, label) of every registered scheme, for forms and the API's documentation."""
    return [(name, scheme.title) for name, scheme in registered().schemes.items()]
