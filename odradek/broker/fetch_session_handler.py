"""The fetcher's side of a fetch session with one leader (KIP-227; Kafka's FetchSessionHandler).

A replica fetcher keeps what the leader's session holds for each partition (fetch offset,
log start offset, max bytes, current leader epoch, last fetched epoch). ``build`` turns the
partitions it wants now into the next request: all of them in a full fetch (epoch 0; the
answer names the new session), else only those added or changed, plus the ones no longer
wanted as forgotten; ``answered`` moves the epoch on, or, when the leader lost the session
or disagrees on its epoch, makes the next fetch a full one. Not thread safe: one fetcher
task owns it.
"""

from __future__ import annotations

from odradek.broker.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from odradek.protocol.errors import ErrorCode


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._held: dict = {}  # partition -> its fields as the leader's session holds them

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH

    def build(self, wanted: dict) -> tuple[int, int, dict, list]:
        """``(session id, epoch, partitions to send, partitions to forget)`` for a fetch of
        ``wanted`` (partition -> a tuple of its request fields)."""
        held = self._held
        self._held = wanted
        if self.full:
            return self.session_id, INITIAL_EPOCH, wanted, []
        send = {key: fields for key, fields in wanted.items() if held.get(key) != fields}
        forget = [key for key in held if key not in wanted]
        return self.session_id, self.epoch, send, forget

    def answered(self, error_code: int, session_id: int) -> bool:
        """Take the response's top-level error and session id; False when the response is
        a session error (nothing in it to use; the next fetch is full)."""
        if error_code == ErrorCode.fetch_session_id_not_found:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            return False
        if error_code == ErrorCode.invalid_fetch_session_epoch:
            self.epoch = INITIAL_EPOCH  # the full fetch closes it and opens another
            return False
        if error_code:
            return True
        if session_id == INVALID_SESSION_ID:  # no session (or closed): full fetches
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif self.full:
            self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def closed(self) -> None:
        """The session is being closed (a final fetch, epoch -1): no session from now on."""
        self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        self._held = {}

    def reset(self) -> None:
        """A request failed on the way (its effect on the session unknown): start over."""
        self.epoch = INITIAL_EPOCH
