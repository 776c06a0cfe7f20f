"""The first listing of an lxcpath's containers, made before the backend connects: one
``lxc-ls --fancy`` (a few milliseconds) and the containers' config files, in the thread the
``corral`` command starts before its UI, so local containers are in the first frame."""

from __future__ import annotations

import os
import shutil
import subprocess

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
    if shutil.which("lxc-ls") is None or not os.path.isdir(remote.address):
        raise Unreachable("no lxc tools or no lxcpath")  # the backend says it in words
    done = subprocess.run(["lxc-ls", "-P", remote.address, "--fancy", "-F", "NAME,STATE"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, check=True)
    tools = LXCTools(remote, timeout)
    return FirstListing(remote, ServerInfo(server="lxc", auth="local"), tuple(
        tools.instance(row["NAME"], parse.status_of(row["STATE"]))
        for row in parse.fancy_table(done.stdout) if row.get("NAME")))
