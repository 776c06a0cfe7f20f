"""A directory listing in one round trip: the instance's SFTP channel.

``GET /1.0/instances/<name>/sftp`` with ``Upgrade: sftp`` (LXD 5.0 and Incus answer it;
no API extension names it) turns the connection into an SFTP server running inside the
instance. One ``READDIR`` answers every name of a directory *with* its
type, size, mode, owner and modification time, where the ``/files`` API needs one ``HEAD``
per name (and gives no size). The file panel lists through it where the daemon offers it
(:meth:`~backends.lxd.files.Files.list_names`), and through ``/files`` otherwise.

Only what a listing needs of SFTP version 3 is here: ``INIT``, ``OPENDIR``, ``READDIR``,
``READLINK`` and ``CLOSE``; requests that do not wait on each other are sent together.
Everything blocks: it runs in the remote's pool threads. Paths are resolved by the server
inside the instance, as for ``/files``.
"""

from __future__ import annotations

import socket
import ssl
import stat
import struct
import threading
from urllib.parse import quote, urlencode

from ..models import FileEntry, Remote
from .tls import ssl_context

_INIT, _VERSION = 1, 2
_OPENDIR, _READDIR, _CLOSE, _READLINK = 11, 12, 4, 19
_STATUS, _HANDLE, _NAME = 101, 102, 104
_EOF, _NO_SUCH_FILE, _PERMISSION_DENIED = 1, 2, 3
_SIZE, _UIDGID, _PERMISSIONS, _ACMODTIME, _EXTENDED = 0x1, 0x2, 0x4, 0x8, 0x80000000

MAX_PACKET = 1 << 20
"""An answer longer than this is not believed (a READDIR answer is tens of KiB)."""
MAX_ENTRIES = 100_000
"""A directory with more names than this is refused rather than held in memory."""


class SFTPError(Exception):
    """The SFTP server said no, or spoke out of turn. ``code`` is its status code (0 when
    it is not an SFTP status: the channel itself failed)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.http_status = 0
        """The daemon's HTTP status when it refused the upgrade (404: no such endpoint)."""
        self.in_step = False
        """The channel can go on (the server refused one request and nothing is pending)."""


def _string(data: bytes | str) -> bytes:
    raw = data.encode(errors="surrogateescape") if isinstance(data, str) else data
    return struct.pack(">I", len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def u32(self) -> int:
        if self.at + 4 > len(self.data):
            raise SFTPError("a short SFTP packet")
        (value,) = struct.unpack_from(">I", self.data, self.at)
        self.at += 4
        return value

    def u64(self) -> int:
        if self.at + 8 > len(self.data):
            raise SFTPError("a short SFTP packet")
        (value,) = struct.unpack_from(">Q", self.data, self.at)
        self.at += 8
        return value

    def bytes(self) -> bytes:
        n = self.u32()
        if self.at + n > len(self.data):
            raise SFTPError("a short SFTP packet")
        value = self.data[self.at:self.at + n]
        self.at += n
        return value

    def attrs(self) -> dict[str, int]:
        flags = self.u32()
        out: dict[str, int] = {}
        if flags & _SIZE:
            out["size"] = self.u64()
        if flags & _UIDGID:
            out["uid"], out["gid"] = self.u32(), self.u32()
        if flags & _PERMISSIONS:
            out["mode"] = self.u32()
        if flags & _ACMODTIME:
            out["atime"], out["mtime"] = self.u32(), self.u32()
        if flags & _EXTENDED:
            for _ in range(self.u32()):
                self.bytes()
                self.bytes()
        return out


def _connect(remote: Remote, timeout: float) -> socket.socket:
    if remote.is_unix:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(remote.socket_path)
        except OSError:
            sock.close()
            raise
        return sock
    hostport = remote.address.split("://", 1)[1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    raw = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    try:
        return ssl_context(remote).wrap_socket(raw, server_hostname=host.strip("[]"))
    except (OSError, ssl.SSLError):
        raw.close()
        raise


class SFTPChannel:
    """One instance's SFTP channel: blocking, one request batch at a time (a lock)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = b""
        self._next_id = 0
        self.lock = threading.Lock()
        self.closed = False

    @classmethod
    def open(cls, remote: Remote, instance: str, timeout: float) -> SFTPChannel:
        """Connect, upgrade ``/1.0/instances/<instance>/sftp`` and say hello.

        Raises:
            OSError: the daemon cannot be reached.
            SFTPError: it refused the upgrade (its words) or spoke no SFTP.
        """
        sock = _connect(remote, timeout)
        channel = cls(sock)
        try:
            query = f"?{urlencode({'project': remote.project})}" \
                if remote.project != "default" else ""
            sock.sendall((f"GET /1.0/instances/{quote(instance, safe='')}/sftp{query} "
                          "HTTP/1.1\r\nHost: lxd\r\nUpgrade: sftp\r\n"
                          "Connection: Upgrade\r\n\r\n").encode())
            head = channel._read_until(b"\r\n\r\n", 64 << 10)
            status_line = head.split(b"\r\n", 1)[0].decode(errors="replace")
            if " 101 " not in f"{status_line} ":
                error = SFTPError(f"the daemon answered {status_line.partition(' ')[2] or '?'}")
                status = status_line.split(" ")[1:2]
                error.http_status = int(status[0]) if status and status[0].isdigit() else 0
                raise error
            sock.sendall(channel._packet(_INIT, struct.pack(">I", 3)))
            kind, _body = channel._receive()
            if kind != _VERSION:
                raise SFTPError("the instance's SFTP server did not say its version")
        except BaseException:
            channel.close()
            raise
        return channel

    # Packets -----------------------------------------------------------------------------

    def _packet(self, kind: int, body: bytes) -> bytes:
        return struct.pack(">IB", len(body) + 1, kind) + body

    def _request(self, kind: int, body: bytes) -> tuple[int, bytes]:
        self._next_id = (self._next_id + 1) & 0xFFFFFFFF
        return self._next_id, self._packet(kind, struct.pack(">I", self._next_id) + body)

    def _read_until(self, marker: bytes, limit: int) -> bytes:
        while marker not in self._buf:
            if len(self._buf) > limit:
                raise SFTPError("the daemon's answer to the upgrade is too long")
            self._fill()
        head, _, self._buf = self._buf.partition(marker)
        return head

    def _fill(self) -> None:
        chunk = self._sock.recv(1 << 16)
        if not chunk:
            raise SFTPError("the instance's SFTP channel closed")
        self._buf += chunk

    def _receive(self) -> tuple[int, bytes]:
        """The next packet: (type, body after the type byte)."""
        while len(self._buf) < 4:
            self._fill()
        (length,) = struct.unpack_from(">I", self._buf)
        if not 1 <= length <= MAX_PACKET:
            raise SFTPError(f"an SFTP packet of {length} bytes")
        while len(self._buf) < 4 + length:
            self._fill()
        packet, self._buf = self._buf[4:4 + length], self._buf[4 + length:]
        return packet[0], packet[1:]

    def _answer(self, want: int) -> tuple[int, _Reader]:
        kind, body = self._receive()
        reader = _Reader(body)
        if reader.u32() != want:
            raise SFTPError("an SFTP answer to another request")
        if kind == _STATUS:
            code, message = reader.u32(), reader.bytes().decode(errors="replace")
            return kind, _Reader(struct.pack(">I", code) + _string(message))
        return kind, reader

    @staticmethod
    def _status(reader: _Reader) -> SFTPError:
        code = reader.u32()
        return SFTPError(reader.bytes().decode(errors="replace") or f"status {code}", code)

    # Listing -----------------------------------------------------------------------------

    def listdir(self, path: str) -> list[FileEntry]:
        """Every entry of directory ``path`` (not ``.`` and ``..``) with its details, and
        each symlink's target.

        Raises:
            SFTPError: ``code`` 2 (no such file), 3 (permission denied), 4 (failure: e.g.
            not a directory) with the server's words; 0 when the channel broke.
            OSError: the connection failed.
        """
        with self.lock:
            try:
                return self._listdir(path)
            except SFTPError as e:
                if not e.in_step:
                    self.close()  # out of step or broken: never used again
                raise
            except BaseException:
                self.close()
                raise

    def _listdir(self, path: str) -> list[FileEntry]:
        want, packet = self._request(_OPENDIR, _string(path))
        self._sock.sendall(packet)
        kind, reader = self._answer(want)
        if kind == _STATUS:
            error = self._status(reader)
            error.in_step = True  # (no such directory, not one, not allowed)
            raise error
        if kind != _HANDLE:
            raise SFTPError("no handle for the directory")
        handle = reader.bytes()
        found: list[tuple[bytes, dict[str, int]]] = []
        while True:
            want, packet = self._request(_READDIR, _string(handle))
            self._sock.sendall(packet)
            kind, reader = self._answer(want)
            if kind == _STATUS:
                error = self._status(reader)
                if error.code == _EOF:
                    break
                raise error
            if kind != _NAME:
                raise SFTPError("an SFTP answer that is not names")
            for _ in range(reader.u32()):
                raw = reader.bytes()
                reader.bytes()  # the "ls -l" line: everything is in the attributes
                found.append((raw, reader.attrs()))
            if len(found) > MAX_ENTRIES:
                raise SFTPError(f"{path} has more than {MAX_ENTRIES} entries")
        want, packet = self._request(_CLOSE, _string(handle))
        self._sock.sendall(packet)  # its answer is read with the links' below
        base = path.rstrip("/")
        entries: list[FileEntry] = []
        links: list[tuple[int, int]] = []  # (request id, index in entries)
        batch = [packet]
        close_id = want
        for raw, attrs in found:
            name = raw.decode(errors="surrogateescape")
            if name in (".", "..") or "/" in name or not name:
                continue
            mode = attrs.get("mode", 0)
            kind_bits = stat.S_IFMT(mode)
            kind_name = ("directory" if kind_bits == stat.S_IFDIR else
                         "file" if kind_bits == stat.S_IFREG else
                         "symlink" if kind_bits == stat.S_IFLNK else "other")
            child = f"{base}/{name}"
            if kind_name == "symlink":
                want, packet = self._request(_READLINK, _string(child))
                batch.append(packet)
                links.append((want, len(entries)))
            entries.append(FileEntry(child, kind_name,
                                     attrs.get("size", 0) if kind_name == "file" else 0,
                                     mode & 0o7777, attrs.get("uid", 0), attrs.get("gid", 0)))
        if len(batch) > 1:
            self._sock.sendall(b"".join(batch[1:]))  # every READLINK at once
        kind, reader = self._answer(close_id)
        for want, index in links:
            kind, reader = self._answer(want)
            if kind == _NAME and reader.u32() >= 1:
                target = reader.bytes().decode(errors="surrogateescape")
                e = entries[index]
                entries[index] = FileEntry(e.path, e.kind, 0, e.mode, e.uid, e.gid, target)
        return entries

    def close(self) -> None:
        self.closed = True
        try:
            self._sock.close()
        except OSError:
            pass
