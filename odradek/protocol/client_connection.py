"""The requesting side of one Kafka connection, sans-IO: requests in → bytes out, bytes in → responses out.

``ClientConnection`` is what the Python client, the Spark pipeline and broker-to-broker
channels (replica fetchers, the controller's) share about talking to a broker, with no
sockets, tasks, threads or clocks (h11's shape). A transport owns one and moves its bytes:
``odradek.net.connection`` over asyncio, ``odradek.pipeline.blocking_client`` over a
blocking socket.

* **Requests in, bytes out.** :meth:`request` gives a request its correlation id and
  returns its size-prefixed frame; :meth:`request_parts` does the same for a frame packed
  by hand (``hot_requests``), as buffers for ``writelines``. Correlation ids count from 1
  and wrap at 2**31-1.
* **In flight.** Every request that expects an answer is remembered under its
  correlation id with the API key, version and a *token* the transport attaches (a future
  and a timer, say). Kafka answers in order, but the id, not the order, matches an answer.
  :meth:`forget` drops one (the transport timed it out), :meth:`fail_all` hands every token
  back when the connection is gone.
* **Bytes in, responses out.** A stream transport receives into :meth:`get_buffer` and
  calls :meth:`received`, which cuts frames (``frames.FrameReader``) and yields one
  :class:`Response` per frame; a transport that reads whole frames itself hands each to
  :meth:`response`. A frame that does not decode becomes a Response carrying the error
  (``MalformedResponse``) and the connection carries on; a bad size prefix raises
  ``FrameError`` (close the connection).
* **ApiVersions.** :meth:`api_versions_request` is what to send first;
  :meth:`api_versions_answered` takes the answer, steps down to an older ApiVersions
  version when the broker asks, and then fixes :attr:`versions`: per API the highest
  version both sides speak (``client_versions.negotiate``), optionally capped by the owner
  (the pipeline speaks fewer APIs and versions than the client).

Request timeouts are the transport's, since it owns the clock.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple

from odradek.protocol import messages
from odradek.protocol.api_keys import API_VERSIONS
from odradek.protocol.client_versions import client_versions, negotiate
from odradek.protocol.errors import ErrorCode, error_for
from odradek.protocol.frames import FrameReader
from odradek.protocol.request_builder import build_request

SOFTWARE_NAME = "odradek-python"
SOFTWARE_VERSION = "0.1.0"
MAX_RESPONSE_SIZE = 512 * 1024 * 1024
_MAX_CORRELATION_ID = 0x7FFFFFFF
_CORRELATION_ID = struct.Struct(">i")
_new_tuple = tuple.__new__  # builds a NamedTuple without its Python-level __new__ (the hot path)


class FrameError(ValueError):
    """The byte stream cannot be cut into frames (a bad size prefix): close the connection."""


class Response(NamedTuple):
    """One answer: ``entity`` is the decoded response, or ``error`` says why there is none."""

    correlation_id: int
    api_key: int
    version: int
    token: object  # what the transport attached to the request
    entity: object | None
    error: Exception | None


class ClientConnection:
    """The state of one connection's requesting side; one owner, not thread-safe."""

    def __init__(
        self,
        client_id: str | None,
        *,
        version_caps: Mapping[int, int] | None = None,
        software_name: str = SOFTWARE_NAME,
        software_version: str = SOFTWARE_VERSION,
        max_response_size: int = MAX_RESPONSE_SIZE,
    ):
        self.client_id = client_id
        self.versions: dict[int, int] = {}  # api key -> the version to use, once negotiated
        self.broker_versions: dict[int, tuple[int, int]] = {}  # api key -> (min, max) the broker speaks
        self._version_caps = version_caps
        self._software = {"client_software_name": software_name, "client_software_version": software_version}
        self._api_versions_version = client_versions(API_VERSIONS).stop - 1
        self._reader = FrameReader(max_response_size)
        self._in_flight: dict[int, tuple[int, int, object]] = {}
        self._next_correlation_id = 1

    # -- versions --------------------------------------------------------------------------

    def api_versions_request(self) -> tuple[int, dict]:
        """``(version, values)`` of the ApiVersions request to send (first, and after a step down)."""
        return self._api_versions_version, dict(self._software)

    def api_versions_answered(self, response) -> bool:
        """Take an ApiVersions answer: True when :attr:`versions` is set, False when the broker
        asked for an older ApiVersions (send :meth:`api_versions_request` again). Raises the
        Kafka error of any other error code."""
        code = int(response.error_code)
        if code == ErrorCode.unsupported_version and self._api_versions_version > 0:
            # The broker answered in v0 with the versions it supports.
            top = next((k.max_version for k in response.api_keys if k.api_key == API_VERSIONS), 0)
            self._api_versions_version = min(self._api_versions_version - 1, top)
            return False
        if code:
            raise error_for(code)("ApiVersions failed")
        self.broker_versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }
        self.versions = negotiate(self.broker_versions, self._version_caps)
        return True

    def supports(self, api_key: int) -> bool:
        return api_key in self.versions

    # -- requests in, bytes out ------------------------------------------------------------

    def request(
        self,
        api_key: int,
        version: int,
        values,
        *,
        token: object = None,
        expect_response: bool = True,
    ) -> tuple[int, bytes]:
        """``(correlation id, frame)`` of one request. ``values``: a dict for
        ``request_builder.build_request``, a callable ``f(version) -> dict``, or a kio entity.
        Raises whatever building or encoding raises (nothing is then in flight)."""
        if callable(values):
            values = values(version)
        entity = build_request(api_key, version, values) if isinstance(values, dict) else values
        correlation_id = self._next_correlation_id
        frame = messages.encode_request(api_key, version, correlation_id, self.client_id, entity)
        self._next_correlation_id = correlation_id + 1 if correlation_id < _MAX_CORRELATION_ID else 1
        if expect_response:
            self._in_flight[correlation_id] = (api_key, version, token)
        return correlation_id, frame

    def request_parts(
        self,
        api_key: int,
        version: int,
        build: Callable[[int], list],
        *,
        token: object = None,
        expect_response: bool = True,
    ) -> tuple[int, list]:
        """Like :meth:`request`, for a frame packed by hand: ``build(correlation_id) -> [buffers]``."""
        correlation_id = self._next_correlation_id
        parts = build(correlation_id)
        self._next_correlation_id = correlation_id + 1 if correlation_id < _MAX_CORRELATION_ID else 1
        if expect_response:
            self._in_flight[correlation_id] = (api_key, version, token)
        return correlation_id, parts

    # -- in flight -------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def in_flight_request(self, correlation_id: int) -> tuple[int, int, object] | None:
        """``(api key, version, token)`` of a request still awaiting its answer."""
        return self._in_flight.get(correlation_id)

    def oldest_in_flight(self) -> int | None:
        """The correlation id of the oldest request awaiting its answer (Kafka answers in order)."""
        return next(iter(self._in_flight), None)

    def forget(self, correlation_id: int) -> object:
        """Stop waiting for one answer (it would be dropped); its token, or None."""
        item = self._in_flight.pop(correlation_id, None)
        return None if item is None else item[2]

    def fail_all(self) -> list:
        """The connection is gone: every token still waiting, oldest first."""
        pending, self._in_flight = self._in_flight, {}
        return [token for _, _, token in pending.values()]

    # -- bytes in, responses out -----------------------------------------------------------

    def get_buffer(self) -> memoryview:
        """Where a stream transport should receive next."""
        return self._reader.get_buffer()

    def received(self, nbytes: int) -> Iterator[Response]:
        """``nbytes`` arrived in the last :meth:`get_buffer`: a Response per complete frame, to
        iterate at once (the frames live until the next receive). Raises FrameError, before any
        answer is taken out of flight, for a size prefix out of range or a frame too short for
        a correlation id."""
        try:
            frames = self._reader.buffer_updated(nbytes)
        except ValueError as exc:
            raise FrameError(str(exc)) from None
        return self.responses(frames)

    def response(self, frame) -> Response:
        """The Response in one complete frame (without its size prefix)."""
        return next(self.responses((frame,)))

    def responses(self, frames) -> Iterator[Response]:
        """A Response per complete frame (without its size prefix), in order, decoded as it is
        taken (a generator: the caller acts on each answer before the next is decoded).
        FrameError, raised here and before any answer is taken out of flight, when a frame
        is too short for a correlation id."""
        for frame in frames:
            if len(frame) < 4:
                raise FrameError(f"a response of {len(frame)} bytes has no correlation id")
        return self._decode(frames)

    def _decode(self, frames) -> Iterator[Response]:
        take = self._in_flight.pop
        for frame in frames:  # the client's hot loop
            (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 0)
            item = take(correlation_id, None)
            if item is None:
                error = messages.MalformedResponse(f"response with unknown correlation id {correlation_id}")
                yield Response(correlation_id, -1, -1, None, None, error)
                continue
            api_key, version, token = item
            try:
                try:
                    _, entity = messages.decode_response(api_key, version, frame)
                except Exception:
                    if api_key != API_VERSIONS:
                        raise
                    # A broker that does not support our ApiVersions version answers in v0.
                    _, entity = messages.decode_response(api_key, 0, frame)
            except Exception as exc:
                yield Response(correlation_id, api_key, version, token, None, exc)
                continue
            yield _new_tuple(Response, (correlation_id, api_key, version, token, entity, None))
