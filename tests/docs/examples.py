"""The runnable examples of a Markdown page, in order, as the tests run them.

A fenced block is run when an HTML comment on the line before it says how:

    <!-- example: KIND [ARGUMENT] -->
    ```python
    ...
    ```

KIND is one of:

- ``install``: the installation command (the test installs the wheel built from this
  checkout, with the locked versions, instead of asking an index);
- ``write PATH`` / ``append PATH``: the block is a file of the reader's project, or is added
  to the end of one (``proj/settings.py``, ``proj/urls.py``);
- ``sh``: each line is a command, run in the project's directory;
- ``background``: each line is a long-running process (a worker, beat, a server), started
  and kept running, and restarted after a later ``write`` or ``append`` as the page tells
  the reader to do;
- ``shell``: the block runs in ``python manage.py shell``;
- ``curl``: the block runs in ``sh`` against the page's running server.

Blocks may be indented (inside a list item); they are dedented. A block without such a
comment is not run, and each page's test says which of its blocks may go without.
"""

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

MARKED = re.compile(
    r"^[ \t]*<!-- example: (?P<kind>[\w-]+)(?: (?P<argument>[^>]*?))? -->\n"
    r"(?P<indent>[ \t]*)```(?P<lang>[\w-]*)\n(?P<code>.*?)\n(?P=indent)```",
    re.M | re.S,
)
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)\n(?P<code>.*?)\n(?P=indent)```", re.M | re.S
)
HEADING = re.compile(r"^## (.+)$", re.M)
TAB = re.compile(r'^[ \t]*=== "(.+)"$', re.M)


@dataclass(frozen=True)
class Example:
    kind: str
    argument: str
    code: str
    section: str
    offset: int
    tab: str = ""  # the content tab (`=== "Receiving only"`) the block is in, if any


def section_at(text: str, offset: int) -> str:
    headings = [m for m in HEADING.finditer(text) if m.start() < offset]
    return headings[-1].group(1) if headings else ""


def tab_at(text: str, offset: int) -> str:
    headings = [m.start() for m in HEADING.finditer(text) if m.start() < offset]
    tabs = [m for m in TAB.finditer(text) if (headings[-1] if headings else 0) < m.start() < offset]
    return tabs[-1].group(1) if tabs else ""


def examples(page: Path) -> list[Example]:
    text = page.read_text()
    return [
        Example(
            kind=m["kind"],
            argument=(m["argument"] or "").strip(),
            code=textwrap.dedent(m["code"]) + "\n",
            section=section_at(text, m.start()),
            offset=m.start(),
            tab=tab_at(text, m.start()),
        )
        for m in MARKED.finditer(text)
    ]


def unmarked_blocks(page: Path, sections: set[str]) -> list[str]:
    """The fenced blocks of these sections that no example comment precedes."""
    text = page.read_text()
    marked = {m.start("indent") for m in MARKED.finditer(text)}
    return [
        m["code"][:60]
        for m in FENCE.finditer(text)
        if section_at(text, m.start()) in sections and m.start() not in marked
    ]
