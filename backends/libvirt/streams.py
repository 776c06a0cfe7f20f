"""Disk bytes through libvirt streams, in a worker thread (:mod:`backends.work`): a pool
volume read as a file tarfile copies from (``virStorageVolDownload``), a file uploaded into
a volume (``virStorageVolUpload``), and progress in bytes. Everything blocks; a cancel is
seen between chunks (the caller aborts the stream).

The transfers run on a connection of their own (:func:`on_connection`), opened without
keepalive: libvirt 9.0's client crashed the process here finishing a stream over its SSH
transport while keepalive ran on that connection (reproduced alone, without corral; never
without keepalive). A daemon that stops answering mid-transfer is noticed by the remote's
own connection (its keepalive), not by the transfer. Every libvirt object the work made
(a stream, a volume) is freed before that connection closes, in the same thread, never
later by another (a failure's traceback is cleared first).

Both directions are sparse streams: the holes of a disk cross as their length, not as
zeros, an uncompressed archive keeps them as holes (:class:`SparseFile`), and an
uploaded volume gets them back."""

from __future__ import annotations

import contextlib
import io
import traceback
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, TypeVar

import libvirt

from ..errors import OperationFailed
from ..units import human_size
from ..work import Worker
from .connection import CREDENTIALS

T = TypeVar("T")

CHUNK = 1 << 20
ZEROS = bytes(CHUNK)
"""A hole's bytes as read, one buffer for all (:class:`SparseFile` knows it by identity:
a large hole costs no memory traffic)."""


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
                 label: str, sparse: bool) -> None:
        self.stream, self.left, self.transfer, self.label = stream, size, transfer, label
        self.flags = libvirt.VIR_STREAM_RECV_STOP_AT_HOLE if sparse else 0
        self.hole = 0  # bytes of a hole announced and not yet read

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        self.transfer.worker.check()
        n = self.left if n < 0 else min(n, self.left)
        parts, got = [], 0
        while got < n:
            if self.hole:
                take = min(self.hole, n - got)
                parts.append(ZEROS if take == CHUNK else bytes(take))
                self.hole -= take
                got += take
                continue
            data = self.stream.recvFlags(min(n - got, CHUNK), self.flags)
            if data == -3:  # at a hole: its length comes next
                self.hole = self.stream.recvHole(0)
                if self.hole <= 0:
                    break
                continue
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


class SparseFile(io.RawIOBase):
    """A new file written in sequence (an uncompressed tar) where whole blocks of zeros
    are skipped over, not written: they stay holes. :meth:`end` sets its length."""

    def __init__(self, f) -> None:
        self.f = f

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        n = len(data)
        if data is ZEROS or (n >= 4096 and not bytes(data).strip(b"\0")):
            self.f.seek(n, io.SEEK_CUR)
        else:
            self.f.write(data)
        return n

    def tell(self) -> int:
        return self.f.tell()

    def end(self) -> None:
        self.f.truncate(self.f.tell())


def volume_xml(name: str, size: int) -> str:
    """A new volume of exactly ``size`` bytes, allocated as it is written (libvirt reads
    its format again once uploaded; the domain says which it is)."""
    root = ET.Element("volume")
    ET.SubElement(root, "name").text = name
    ET.SubElement(root, "capacity", unit="bytes").text = str(size)
    ET.SubElement(root, "allocation", unit="bytes").text = "0"
    ET.SubElement(ET.SubElement(root, "target"), "format", type="raw")
    return ET.tostring(root, encoding="unicode")


def _refuse(_credentials: list, _opaque: object) -> int:
    return -1  # no prompt, as the remote's own connection (connection.py)


def on_connection(worker: Worker, uri: str, work: Callable[..., T], *args: object) -> T:
    """``work(worker, conn, *args)`` on a connection of its own, closed afterwards, after
    every libvirt object ``work`` made is freed (see the module): on a failure, what the
    frames of its traceback hold is let go first."""
    conn = libvirt.openAuth(uri, [CREDENTIALS, _refuse, None], 0)  # (no keepalive: above)
    try:
        return work(worker, conn, *args)
    except BaseException as e:
        traceback.clear_frames(e.__traceback__)
        raise
    finally:
        conn.close()


def download(conn: libvirt.virConnect, vol: libvirt.virStorageVol, size: int,
             transfer: Transfer, label: str, consume: Callable[[VolumeReader], None], *,
             sparse: bool = True) -> None:
    """``consume`` reads the volume's first ``size`` bytes."""
    stream = conn.newStream(0)
    try:
        vol.download(stream, 0, size,
                     libvirt.VIR_STORAGE_VOL_DOWNLOAD_SPARSE_STREAM if sparse else 0)
        consume(VolumeReader(stream, size, transfer, label, sparse))
        stream.finish()
    except BaseException:
        with contextlib.suppress(libvirt.libvirtError):
            stream.abort()
        raise


def upload(conn: libvirt.virConnect, vol: libvirt.virStorageVol, path: Path, size: int,
           transfer: Transfer, label: str, *, sparse: bool = True) -> None:
    stream = conn.newStream(0)
    try:
        vol.upload(stream, 0, size, libvirt.VIR_STORAGE_VOL_UPLOAD_SPARSE_STREAM if sparse else 0)
        with open(path, "rb") as f:
            while True:
                transfer.worker.check()
                data = f.read(CHUNK)
                if not data:
                    break
                if sparse and not data.strip(b"\0"):  # a hole on the far side, not zeros
                    stream.sendHole(len(data), 0)
                    transfer.moved(label, len(data))
                    continue
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
