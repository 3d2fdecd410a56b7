"""The Procfile's ``flower`` line: Flower, behind basic auth it refuses to start without.

``python -m webhooks_project.flower --port=5555`` reads ``FLOWER_BASIC_AUTH``
(``user:password``, several comma-separated), refuses a missing one, one whose password
this repository ships, or one shorter than 12 characters (exit status 2, the problems on
stderr, before anything is started), then replaces itself with ``celery -A
webhooks_project flower --basic-auth=... <arguments>``. The password never appears on
the command line it was given (only in the exec'd process's arguments, as before).
"""

import os
import shutil
import sys

from .keys import flower_auth_problems


def main(argv: list[str]) -> int:
    auth = os.environ.get("FLOWER_BASIC_AUTH", "")
    problems = flower_auth_problems(auth)
    if problems:
        listed = "\n".join(f"  - {problem}" for problem in problems)
        print(f"Refusing to start Flower:\n{listed}", file=sys.stderr)
        return 2
    celery = shutil.which("celery") or "celery"
    command = [celery, "-A", "webhooks_project", "flower", f"--basic-auth={auth}", *argv]
    os.execv(celery, command)  # noqa: S606 (our own command line, no shell)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
