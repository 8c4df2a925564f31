"""ControlledShutdown (key 7), v3: a broker about to stop asks the controller to move its
leaderships away first. Answered by the active controller with the partitions the broker
still leads (none when every leadership moved); other brokers answer NOT_CONTROLLER.
"""

from odradek.broker.handlers import api
from odradek.cluster.zk_controller import NotActiveController
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker.controlled_shutdown_schema import (
    ControlledShutdownResponse,
    RemainingPartition,
)


@api(7, 3, 3)
async def handle_controlled_shutdown(broker, request):
    body = request.body
    if broker.cluster is None:
        return ControlledShutdownResponse(error_code=ErrorCode.not_controller, remaining_partitions=())
    try:
        remaining = await broker.cluster.on_controller("controlled_shutdown", body.broker_id, body.broker_epoch)
    except NotActiveController:
        return ControlledShutdownResponse(error_code=ErrorCode.not_controller, remaining_partitions=())
    except errors.KafkaError as exc:
        return ControlledShutdownResponse(error_code=exc.code, remaining_partitions=())
    return ControlledShutdownResponse(
        error_code=ErrorCode.none,
        remaining_partitions=tuple(
            RemainingPartition(topic_name=tp.topic, partition_index=tp.partition) for tp in sorted(remaining)
        ),
    )
