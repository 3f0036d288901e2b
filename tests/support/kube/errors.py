"""The fake API server's errors: a Status object's code, reason and message."""

from __future__ import annotations


class ApiStatusError(Exception):
    """An API error: the Status object's code, reason and message."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
