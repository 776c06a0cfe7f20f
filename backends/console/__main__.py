"""``python -m backends.console``: run a console server (see :mod:`.server`)."""

import sys

from .server import main

if __name__ == "__main__":
    sys.exit(main())
