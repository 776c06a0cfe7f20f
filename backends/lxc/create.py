"""Creating LXC containers: from an offline template or an LXD-style image tarball (checked
and unpacked by corral's one archive reader), and the launch wizard's sources, options and
name check."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from ..archive import ArchiveRefused, read_archive
from ..base import Backend
from ..errors import BackendError, InvalidInput, OperationFailed
from ..models import Instance, InstanceStatus
from ..create_models import CreateOptions, CreateRequest, CreateSource, SourceField
from ..steps import Steps
from ..work import Worker, in_thread
from .archive import UnifiedImage
from .limits import cgroup_pairs, cgroup_version, host_supports
from .tools import LXCTools, words


class Create(Backend):
    """Creating containers in :class:`~backends.lxc.backend.LXCBackend`."""

    lxc: LXCTools

    async def create(self, name: str, *, template: str = "busybox", bridge: str | None = None,
                     template_args: list[str] | None = None) -> Instance:
        """Create a container from one of the templates corral runs (:data:`RUNS`):
        ``busybox``, or ``download`` with ``template_args`` such as
        ``["-d", "debian", "-r", "bookworm", "-a", "amd64"]``. An image tarball is made
        into a container by :meth:`create_from_image`, through corral's archive reader.

        Args:
            name: letters, digits, ``-``, ``_``, ``.``; starts with a letter or digit.
            template: a template of :data:`RUNS` installed on this host.
            template_args: only the options :data:`RUNS` names for that template.
            bridge: an existing bridge for a veth NIC; ``None`` for no network.

        Raises:
            InvalidInput: bad name, name taken, a template corral does not run (``local``,
                ``oci``, any other) or an option it does not pass, or a missing bridge;
                nothing is created.
            OperationFailed: the template failed (nothing is left behind).
        """
        problem = self.lxc.name_problem(name)
        if problem:
            raise InvalidInput(problem)
        check_template(template, template_args or [])
        if bridge is not None and not os.path.isdir(f"/sys/class/net/{bridge}/bridge"):
            raise InvalidInput(f"There is no bridge named '{bridge}' on this host.")
        directory = self.lxc.dir(name)
        os.makedirs(self.lxc.path, exist_ok=True)
        try:
            rc, _, err = await self.lxc.run("lxc-create", "-n", name, "-t", template,
                                            *(["--", *template_args] if template_args else []),
                                            timeout=600)
            if rc != 0:
                raise OperationFailed(f"Creating {name} failed: {words(err)}")
            self._set_network(name, bridge)
        except BaseException:
            if directory.exists():
                await asyncio.shield(self.lxc.run("lxc-destroy", "-n", name, timeout=120))
            if directory.exists():
                shutil.rmtree(directory, ignore_errors=True)
            raise
        return await self.lxc.read_instance(name, InstanceStatus.STOPPED)

    async def create_from_image(self, name: str, image: str, *, bridge: str | None = None,
                                progress: Callable[[str], None] | None = None) -> Instance:
        """Create a container from an LXD-style unified image tarball (``metadata.yaml``,
        ``templates/``, ``rootfs/``; any compression tarfile reads), offline.

        The image is read once by the one archive reader (:mod:`backends.archive`, the
        rules of :class:`~backends.lxc.archive.UnifiedImage`) into a private directory in
        the lxcpath: a refused image creates nothing and leaves nothing. Then
        ``lxc-create -t none`` makes the container's directory and config from LXC's
        defaults, corral moves the checked ``rootfs/`` into it (a rename: nothing reads
        the image again, and no tool walks the tree on the host, as LXC's ``local``
        template would through the tree's own links) and adds to the config what that
        template did: LXC's common include, the architecture, the rootfs and the name.

        Raises:
            InvalidInput: bad name, missing bridge, missing file, or not such an image or
                refused (in words); nothing is created.
            Conflict: the name is taken.
            OperationFailed: writing or ``lxc-create`` failed (nothing is left behind).
        """
        self.lxc.check_new_name(name)
        if bridge is not None and not os.path.isdir(f"/sys/class/net/{bridge}/bridge"):
            raise InvalidInput(f"There is no bridge named '{bridge}' on this host.")
        image = os.path.abspath(image)
        if not os.path.isfile(image):
            raise InvalidInput(f"The image {image} does not exist.")
        os.makedirs(self.lxc.path, exist_ok=True)
        work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=".corral-image-",
                                            dir=self.lxc.path))
        directory = self.lxc.dir(name)
        try:
            try:
                await in_thread(_read_image, image, work, progress=progress)
            except ArchiveRefused as e:
                raise InvalidInput(f"{image} is not an LXD-style image tarball: {e}.") \
                    from None
            except OSError as e:
                raise OperationFailed(f"Unpacking {image} failed: "
                                      f"{e.strerror or e} ({e.filename or image}).") from e
            try:
                rc, _, err = await self.lxc.run("lxc-create", "-n", name, "-t", "none",
                                                timeout=120)
                if rc != 0:
                    raise OperationFailed(f"Creating {name} failed: {words(err)}")
                await asyncio.to_thread(self._place_rootfs, name, work / "rootfs")
                self._set_network(name, bridge)
            except BaseException:
                if directory.exists():
                    await asyncio.shield(self.lxc.run("lxc-destroy", "-n", name, timeout=120))
                if directory.exists():
                    await asyncio.shield(asyncio.to_thread(shutil.rmtree, directory, True))
                raise
        finally:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, work, True))
        return await self.lxc.read_instance(name, InstanceStatus.STOPPED)

    def _place_rootfs(self, name: str, checked: Path) -> None:
        """Move the checked root file system into the new container ``name`` (made by
        ``lxc-create -t none``) and add to its config what LXC's ``local`` template
        adds."""
        rootfs = self.lxc.dir(name) / "rootfs"
        try:
            os.rmdir(rootfs)  # an LXC that makes an empty one
        except FileNotFoundError:
            pass
        os.rename(checked, rootfs)
        kept = [line for line in self.lxc.config(name).splitlines()
                if line.split("=")[0].strip() not in ("lxc.rootfs.path", "lxc.uts.name")]
        self.lxc.write_config(name, [
            "# corral: created from an LXD-style image, checked and unpacked by corral",
            "lxc.include = /usr/share/lxc/config/common.conf",
            f"lxc.arch = {os.uname().machine}",
            *kept,
            f"lxc.rootfs.path = dir:{rootfs}",
            f"lxc.uts.name = {name}",
        ])

    # The launch wizard (CREATE) --------------------------------------------------------

    _TEMPLATE_DETAIL = {
        "busybox": "a minimal busybox system, offline",
        "download": "from images.linuxcontainers.org; needs the network and template_args "
                    "such as '-d debian -r bookworm -a amd64'",
    }

    @staticmethod
    def _bridges() -> list[str]:
        try:
            return sorted(e.name for e in os.scandir("/sys/class/net")
                          if os.path.isdir(f"/sys/class/net/{e.name}/bridge"))
        except OSError:
            return []

    async def create_sources(self) -> list[CreateSource]:
        """Each installed template corral runs (:data:`RUNS`, busybox first), and an
        LXD-style image tarball (unpacked by corral's archive reader)."""
        names = sorted((n for n in RUNS if (TEMPLATES / f"lxc-{n}").is_file()),
                       key=lambda n: (n != "busybox", n))
        sources = [CreateSource("template", n, value=n,
                                detail=self._TEMPLATE_DETAIL.get(n, f"the lxc-{n} template"))
                   for n in names]
        sources.append(CreateSource(
            "tarball", "LXD-style image tarball",
            fields=(SourceField("", "Image tarball", "path of an LXD-style image tarball",
                                required=True, path="local"),),
            detail="metadata.yaml + rootfs/ (gzip or xz), checked and unpacked by corral"))
        return sources

    async def create_options(self) -> CreateOptions:
        """Networks: the host's bridges (a veth NIC on one) and ``none``; "" in a request
        means lxcbr0 when that bridge exists, else no NIC. No disk size (a directory)."""
        return CreateOptions(networks=(*self._bridges(), "none"),
                             max_cpus=os.cpu_count() or 1, user_data=False, can_cancel=False,
                             defaults={"cpus": "1", "memory": "512MiB"})

    def check_name(self, name: str) -> str | None:
        return self.lxc.name_problem(name)

    @staticmethod
    def _create_limits(request: CreateRequest) -> dict[str, str]:
        """The wizard's CPUs and memory as limits of :mod:`.limits`, validated (raises
        InvalidInput before anything is made)."""
        version = cgroup_version()
        wanted: dict[str, str] = {}
        if request.memory is not None:
            wanted["memory"] = str(request.memory)
        if request.cpus is not None:
            ncpu = os.cpu_count() or 1
            if not 1 <= request.cpus <= ncpu:
                raise InvalidInput(f"CPUs must be from 1 to {ncpu} (this host's count).")
            if host_supports("cpu_quota", version):
                wanted["cpu_quota"] = str(request.cpus * 100)
            else:
                wanted["cpuset"] = f"0-{request.cpus - 1}" if request.cpus > 1 else "0"
        for key, value in wanted.items():
            cgroup_pairs(key, value, version)
        return wanted

    async def create_instance(self, request: CreateRequest,
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create a container from a template corral runs (``kind="template"``, name in
        ``value``, option ``template_args``: a shell-quoted string; see :meth:`create`) or
        an LXD-style image tarball (``kind="tarball"``, path in ``value``; see
        :meth:`create_from_image`), then apply limits and start it when ``request.start``.

        Limits go into the container's config through :meth:`set_limits`: memory → the
        ``memory`` limit (``memory.limit_in_bytes`` / ``memory.max``); CPUs → the CPU quota
        (``cpu_quota`` = CPUs x 100 %, i.e. ``cpu.cfs_quota_us`` / ``cpu.max``: that much CPU
        time on any of the host's CPUs), or, on a host without the cpu controller, a
        cpuset of the first N CPUs.

        Everything made is destroyed when creating or limiting fails. A container that was
        made but does not start stays (so its log can be read), and
        :class:`OperationFailed` says "created, but could not start: …".

        Raises:
            InvalidInput: a value refused, a template corral does not run or an option
                it does not pass (nothing created).
            Conflict: the name is taken.
            OperationFailed: the template failed (nothing left), or the start failed.
        """
        say = progress or (lambda _text: None)
        name = request.name
        self.lxc.check_new_name(name)
        bridge = _checked_request(request)
        limits = self._create_limits(request)
        try:
            template_args = shlex.split(dict(request.options).get("template_args", ""))
        except ValueError as e:
            raise InvalidInput(f"template_args: {e}") from e
        ref = self.lxc.ref(name)
        async with Steps() as steps:
            await self._make_container(request, bridge, template_args, say)
            steps.undo(f"the container {name}", lambda: self._destroy_new(name))
            if limits:
                say("setting limits…")
                await self.set_limits(ref, limits)
        if request.start:
            say("starting…")
            try:
                await self.start(ref)
            except BackendError as e:
                raise OperationFailed(f"{ref} was created, but could not start: "
                                      f"{e.message}") from e
            return await self.get_instance(ref)
        return await self.lxc.read_instance(name, InstanceStatus.STOPPED)

    async def _make_container(self, request: CreateRequest, bridge: str | None,
                              template_args: list[str], say: Callable[[str], None]) -> None:
        """The container made from the request's source (a failure leaves nothing)."""
        source, name = request.source, request.name
        if source.kind == "template":
            say(f"running the {source.value} template…")
            await self.create(name, template=source.value or "busybox", bridge=bridge,
                              template_args=template_args or None)
        elif source.kind == "tarball":
            if template_args:
                raise InvalidInput("template_args go with a template source only.")
            path = os.path.expanduser(source.value.strip())
            if not path:
                raise InvalidInput("Give the path of an image tarball.")
            say("unpacking image…")
            await self.create_from_image(name, path, bridge=bridge, progress=say)
        else:
            raise InvalidInput(f"An LXC container cannot be made from a '{source.kind}' "
                               f"source.")

    async def _destroy_new(self, name: str) -> None:
        """Undo of a container just made: destroyed, its directory gone."""
        await self.lxc.run("lxc-destroy", "-n", name, "-s", timeout=120)
        await asyncio.to_thread(shutil.rmtree, self.lxc.dir(name), ignore_errors=True)

    def _set_network(self, name: str, bridge: str | None) -> None:
        """Replace the template's network with no NIC or a veth on ``bridge``."""
        lines = [line for line in self.lxc.config(name).splitlines()
                 if not line.strip().startswith("lxc.net.")]
        if bridge is None:
            lines.append("lxc.net.0.type = empty")
        else:
            lines += ["lxc.net.0.type = veth", f"lxc.net.0.link = {bridge}",
                      "lxc.net.0.flags = up"]
        self.lxc.write_config(name, lines)


TEMPLATES = Path("/usr/share/lxc/templates")

# The LXC templates corral runs, each with the options it passes on (True: the option
# takes a value). Nothing else runs: a template unpacks and edits a tree as root on the
# host, through whatever links the tree holds, so one that takes a tree from elsewhere
# would reach the host with it. Trees from elsewhere go through corral's archive reader
# (create_from_image). busybox builds from the host's own files; download fetches from
# images.linuxcontainers.org over HTTPS only (no --server: a server's meta tarball gives
# config lines and the files the template edits). LXC's internal options (--rootfs,
# --path, --name, maps) are never passed on.
RUNS: dict[str, dict[str, bool]] = {
    "busybox": {"--busybox-path": True},
    "download": {"-d": True, "--dist": True, "-r": True, "--release": True, "-a": True,
                 "--arch": True, "--variant": True, "--flush-cache": False,
                 "--force-cache": False},
}
# Why the templates LXC ships that corral does not run are refused, in words.
_REFUSED = {
    "local": "it unpacks the tarballs it is given itself, without corral's checks, and "
             "edits the tree through whatever links it holds on the host; create from an "
             "LXD-style image tarball instead, which corral checks and unpacks",
    "oci": "it unpacks an image from a registry or a path itself, without corral's "
           "checks, and writes the tree's /etc/hostname and /etc/hosts through whatever "
           "links it holds on the host",
}


def check_template(template: str, args: list[str]) -> None:
    """Raise :class:`InvalidInput` unless ``template`` is one corral runs (:data:`RUNS`),
    installed, and every word of ``args`` is an option :data:`RUNS` names for it (as
    ``--opt value``, ``--opt=value``, ``-o value`` or ``-ovalue``)."""
    if template in _REFUSED or (template not in RUNS and (TEMPLATES / f"lxc-{template}")
                                .exists()):
        why = _REFUSED.get(template, "corral runs only templates that build a tree "
                                     "from the host's files or a known image server")
        raise InvalidInput(f"corral does not run LXC's '{template}' template: {why} "
                           f"(it runs: {', '.join(RUNS)}).")
    if template not in RUNS or not (TEMPLATES / f"lxc-{template}").is_file():
        known = [n for n in RUNS if (TEMPLATES / f"lxc-{n}").is_file()]
        raise InvalidInput(f"No LXC template '{template}' (available: "
                           f"{', '.join(known) or 'none'}).")
    options = RUNS[template]
    rest = iter(args)
    for word in rest:
        option, has_value, _ = word.partition("=")
        if not option.startswith("--") and len(option) > 2:
            option, has_value = word[:2], "=" * (len(word) > 2)
        takes = options.get(option)
        if takes is None or (has_value and not takes):
            given = ", ".join(options) or "none"
            raise InvalidInput(f"template_args: corral does not pass '{word}' to the "
                               f"{template} template (it passes: {given}).")
        if takes and not has_value and next(rest, None) is None:
            raise InvalidInput(f"template_args: {option} needs a value.")


def _read_image(worker: Worker, image: str, into: Path) -> dict[str, bytes]:
    """Check and unpack the unified image ``image`` into the private directory ``into``
    (in a thread); returns its ``metadata.yaml``, never written."""
    return read_archive(worker, image, into, UnifiedImage(), label="unpacking image")


def _checked_request(request: CreateRequest) -> str | None:
    """What an LXC container cannot take refused in words; the bridge its NIC goes on
    (None: no NIC)."""
    request.known_options(("template_args",), "an LXC container")
    if request.disk is not None:
        raise InvalidInput("LXC containers here live in a directory: there is no disk "
                           "size to set.")
    if request.profiles:
        raise InvalidInput("LXC containers have no profiles.")
    if request.storage_pool:
        raise InvalidInput("LXC containers have no storage pools here.")
    if request.user_data:
        raise InvalidInput("LXC containers here take no cloud-init user-data.")
    network = request.network
    if network == "":
        return "lxcbr0" if os.path.isdir("/sys/class/net/lxcbr0/bridge") else None
    if network == "none":
        return None
    if not os.path.isdir(f"/sys/class/net/{network}/bridge"):
        raise InvalidInput(f"There is no bridge named '{network}' on this host.")
    return network
