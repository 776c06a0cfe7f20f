"""The first listing of an lxcpath's containers, made before the backend connects: one
``lxc-ls --fancy`` (a few milliseconds) and the containers' config files, in the thread the
``corral`` command starts before its UI, so local containers are in the first frame; and
``lxc-ls --version`` for the backend's connection (:mod:`backends.tool_version`)."""

from __future__ import annotations

import os
import shutil
import subprocess

from .. import tool_version
from ..errors import Unreachable
from ..models import FirstListing, Remote, ServerInfo
from . import parse
from .tools import LXCTools


def first_listing(remote: Remote, timeout: float) -> FirstListing | None:
    """What ``LXCBackend.list_instances`` lists (blocking).

    Raises:
        Unreachable: no lxc tools, or no such lxcpath.
        subprocess.SubprocessError, OSError: ``lxc-ls`` failed or took too long.
    """
    lxc_ls = shutil.which("lxc-ls")
    if lxc_ls is None or not os.path.isdir(remote.address):
        raise Unreachable("no lxc tools or no lxcpath")  # the backend says it in words
    try:
        tool_version.ask(lxc_ls, "--version", timeout=timeout)  # for the backend's connect
    except (OSError, subprocess.SubprocessError):
        pass  # the connection says what is wrong
    done = subprocess.run(["lxc-ls", "-P", remote.address, "--fancy", "-F", "NAME,STATE"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, check=True)
    tools = LXCTools(remote, timeout)
    return FirstListing(remote, ServerInfo(server="lxc", auth="local"), tuple(
        tools.instance(row["NAME"], parse.status_of(row["STATE"]))
        for row in parse.fancy_table(done.stdout) if row.get("NAME")))
