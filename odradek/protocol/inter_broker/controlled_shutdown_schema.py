"""ControlledShutdown (API key 7) v3: a broker about to stop asks the controller to move its
leaderships away first; the answer lists the partitions it still leads (none when done)."""

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from odradek.protocol.inter_broker._schema import field, request, response

API_KEY = 7
VERSION = 3


@request(API_KEY, VERSION)
class ControlledShutdownRequest:
    broker_id: i32 = field("int32")
    broker_epoch: i64 = field("int64", default=i64(-1))


@response(API_KEY, VERSION, nested=True)
class RemainingPartition:
    topic_name: str = field("string")
    partition_index: i32 = field("int32")


@response(API_KEY, VERSION)
class ControlledShutdownResponse:
    error_code: ErrorCode = field("error_code")
    remaining_partitions: tuple[RemainingPartition, ...]
