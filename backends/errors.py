"""Typed errors raised by every backend.

Each error carries a short ``title`` and a ``message`` written for the user: the UI shows
them as they are, so they say what happened and, where it helps, what to do.
"""

from __future__ import annotations


class BackendError(Exception):
    """Base of every error a backend raises."""

    title: str = "Error"

    def __init__(self, message: str, *, title: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if title is not None:
            self.title = title

    def __str__(self) -> str:
        return self.message


class ConfigError(BackendError):
    """A configuration file is unreadable or malformed."""

    title = "Configuration problem"


class Unreachable(BackendError):
    """The remote cannot be reached (no socket, connection refused, daemon gone)."""

    title = "Unreachable"


class NotResponding(Unreachable):
    """The remote accepted the connection but did not answer in time."""

    title = "Not responding"


class AuthError(BackendError):
    """TLS trust failed: no client certificate, untrusted client, or a server certificate
    that does not match the pinned one."""

    title = "Not trusted"


class NotFound(BackendError):
    """The instance (or other object) does not exist (any more)."""

    title = "Not found"


class Conflict(BackendError):
    """The request conflicts with the current state (name taken, instance running, ...)."""

    title = "Conflict"


class InvalidInput(BackendError):
    """Input was rejected before anything was sent."""

    title = "Invalid input"


class Unsupported(BackendError):
    """The backend or instance does not support this action."""

    title = "Not supported"


class OperationFailed(BackendError):
    """The daemon accepted the request but the operation failed."""

    title = "Operation failed"


class StopTimedOut(OperationFailed):
    """A graceful stop did not finish in time; a forced stop may be offered."""

    title = "Stop timed out"


class NeedsConfirmation(InvalidInput):
    """Refused until the user agrees: the request is acceptable only knowingly (an image
    that refers to other host files, say). ``option`` names the create option (or the
    verb's keyword argument) that, set to ``"yes"``/``True``, says the user agreed; the
    message says what they agree to."""

    title = "Please confirm"

    def __init__(self, message: str, *, option: str, title: str | None = None) -> None:
        super().__init__(message, title=title)
        self.option = option


class AcceleratorUnusable(OperationFailed):
    """A VM could not start with its hardware accelerator (KVM present but broken, e.g.
    under nested virtualisation). ``retry_slower`` is true when starting it again uses
    the software emulator (the host fallback was recorded), which the UI may offer."""

    title = "KVM not usable"

    def __init__(self, message: str, *, retry_slower: bool = False) -> None:
        super().__init__(message)
        self.retry_slower = retry_slower
