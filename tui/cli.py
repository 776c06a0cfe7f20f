"""``corral`` command line."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path

from . import __version__
from .locations import config_file


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="corral",
        description=(
            "A keyboard-driven terminal app for every container and VM you have: all the "
            "LXD and Incus remotes configured for the lxc/incus CLIs, side by side."
        ),
        epilog="Press ? inside corral for every key. Configuration: "
        f"{config_file()} (override with CORRAL_CONFIG_FILE).",
    )
    parser.add_argument("--version", action="version", version=f"corral {__version__}")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="config file to use instead of the default")
    parser.add_argument("--theme", metavar="NAME",
                        help="theme: corral-dark, corral-light or any Textual theme")
    parser.add_argument("--remote", action="append", metavar="NAME", dest="remotes",
                        help="show only this remote (repeatable)")
    parser.add_argument("--list-remotes", action="store_true",
                        help="print every remote corral shows, with its state, and any problem, "
                        "then exit (1: none found, or one has a problem)")
    return parser


def main(argv: list[str] | None = None) -> int:
    # No cyclic collection on the way to the first screen: the imports and the first rows
    # make hundreds of thousands of objects, and the collections they set off took
    # 0.1-0.2 s of the start here. The app collects once, freezes what survived and turns
    # the collector back on once the first listings are in (CorralApp._freeze_startup_objects).
    gc.disable()
    args = build_parser().parse_args(argv)
    from . import logfile

    logfile.setup()
    if args.list_remotes:
        gc.enable()  # a plain command: nothing to freeze
        from .listing import list_remotes

        return list_remotes(args.config, args.remotes)
    from . import lastframe

    # The screen of the last run first (dimmed, marked), in the time Python takes to
    # start; then the remotes, and their listings in threads: the daemons answer while
    # the UI is imported and built (most of a start's CPU), so its first frame can show
    # them.
    config_path = args.config or config_file()
    painted = lastframe.paint(os.environ, config_path, args.theme, args.remotes)
    try:
        from .services import startup

        start = startup.prepare(config_path, os.environ, theme=args.theme,
                                remote_names=args.remotes)
        from .graphics import prepare

        prepare(start.config.graphics)  # asks the terminal: before Textual starts
        from .app import CorralApp

        app = CorralApp(start.config, start=start, last_frame=lastframe.Spec(
            os.environ, config_path, args.theme, args.remotes))
        app.run()
    finally:
        if painted is not None:
            painted.done()  # (the alternate screen too, unless Textual took the terminal)
    # A call stuck on a hung remote sits in a worker thread that the interpreter would
    # join at exit (up to its timeout): leave at once instead.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(app.return_code or 0)
