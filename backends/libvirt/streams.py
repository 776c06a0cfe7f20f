"""Disk bytes through libvirt streams, in a worker thread (:mod:`backends.work`): a pool
volume read as a file tarfile copies from (``virStorageVolDownload``), a file uploaded into
a volume (``virStorageVolUpload``), and progress in bytes. Everything blocks; a cancel is
seen between chunks (the caller aborts the stream)."""

from __future__ import annotations

import contextlib
import io
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

from ..errors import OperationFailed
from ..units import human_size
from ..work import Worker

CHUNK = 1 << 20


class Transfer:
    """Bytes moved so far, for progress in words."""

    def __init__(self, worker: Worker, total: int) -> None:
        self.worker, self.total, self.done = worker, total, 0

    def moved(self, what: str, n: int) -> None:
        self.done += n
        self.worker.report(f"{what}: {human_size(self.done)} of {human_size(self.total)}")


class VolumeReader(io.RawIOBase):
    """A pool volume downloaded as a file tarfile reads (exactly ``size`` bytes)."""

    def __init__(self, stream: libvirt.virStream, size: int, transfer: Transfer,
                 label: str) -> None:
        self.stream, self.left, self.transfer, self.label = stream, size, transfer, label

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        self.transfer.worker.check()
        n = self.left if n < 0 else min(n, self.left)
        parts, got = [], 0
        while got < n:
            data = self.stream.recv(min(n - got, CHUNK))
            if not data or not isinstance(data, bytes):
                break
            parts.append(data)
            got += len(data)
        self.left -= got
        self.transfer.moved(self.label, got)
        return b"".join(parts)


class FileReader(io.RawIOBase):
    def __init__(self, f, transfer: Transfer, label: str) -> None:
        self.f, self.transfer, self.label = f, transfer, label

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        self.transfer.worker.check()
        data = self.f.read(n)
        self.transfer.moved(self.label, len(data))
        return data


def volume_xml(name: str, size: int) -> str:
    """A new volume of exactly ``size`` bytes, allocated as it is written (libvirt reads
    its format again once uploaded; the domain says which it is)."""
    root = ET.Element("volume")
    ET.SubElement(root, "name").text = name
    ET.SubElement(root, "capacity", unit="bytes").text = str(size)
    ET.SubElement(root, "allocation", unit="bytes").text = "0"
    ET.SubElement(ET.SubElement(root, "target"), "format", type="raw")
    return ET.tostring(root, encoding="unicode")


def upload(conn: libvirt.virConnect, vol: libvirt.virStorageVol, path: Path, size: int,
            transfer: Transfer, label: str) -> None:
    stream = conn.newStream(0)
    try:
        vol.upload(stream, 0, size, 0)
        with open(path, "rb") as f:
            while True:
                transfer.worker.check()
                data = f.read(CHUNK)
                if not data:
                    break
                view = memoryview(data)
                while view:
                    sent = stream.send(view.tobytes())
                    if sent < 0:
                        raise OperationFailed(f"The upload of {label} was refused by libvirt.")
                    view = view[sent:]
                transfer.moved(label, len(data))
        stream.finish()
    except BaseException:
        with contextlib.suppress(libvirt.libvirtError):
            stream.abort()
        raise
