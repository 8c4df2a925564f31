"""How our inter-broker schema classes are declared: the way kio's generated classes are.

kio's reader and writer and our ``wellformed`` walk work on any frozen dataclass that carries
kio's class variables (``__flexible__``, ``__api_key__``, ...) and a ``kafka_type`` on each
field. The decorators here add those, so a schema module lists only its fields. Every schema
here is of a flexible version (compact strings and arrays, tagged fields), as Kafka 3.x sends.
"""

import dataclasses

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16


def _entity(api_key: int, version: int, kind: EntityType, header: type):
    def decorate(cls):
        cls = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)(cls)
        cls.__type__ = kind
        cls.__version__ = i16(version)
        cls.__flexible__ = True
        cls.__api_key__ = i16(api_key)
        cls.__header_schema__ = header
        return cls

    return decorate


def request(api_key: int, version: int, *, nested: bool = False):
    """Class decorator: the request body (or, ``nested``, a struct inside it)."""
    return _entity(api_key, version, EntityType.nested if nested else EntityType.request, RequestHeader)


def response(api_key: int, version: int, *, nested: bool = False):
    """Class decorator: the response body (or, ``nested``, a struct inside it)."""
    return _entity(api_key, version, EntityType.nested if nested else EntityType.response, ResponseHeader)


def field(kafka_type: str, **kwargs):
    return dataclasses.field(metadata={"kafka_type": kafka_type}, **kwargs)
