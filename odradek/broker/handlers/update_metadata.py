"""UpdateMetadata (key 6), v8: the controller's view of the cluster — live brokers, and each
partition's leader, ISR, replicas and offline replicas — which this broker's Metadata,
DescribeCluster and request routing then serve from (cluster mode only).

A request from a controller older than one already heard from is refused with
STALE_CONTROLLER_EPOCH. A topic whose partitions all come with leader -2 is being deleted:
it leaves the metadata, and its local logs go.
"""

import logging

from odradek.broker.handlers import api, cluster_admin
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker.update_metadata_schema import UpdateMetadataResponse

log = logging.getLogger(__name__)


@api(6, 8, 8)
async def handle_update_metadata(broker, request):
    body = request.body
    if broker.cluster is None:
        log.warning("UpdateMetadata from %s refused: this broker is not in a cluster (no zookeeper.connect)", request.peer)
        return UpdateMetadataResponse(error_code=ErrorCode.invalid_request)
    stale = cluster_admin.stale_control_request(broker, body)
    if stale is not None:
        log.warning(
            "refused UpdateMetadata from controller %d with epoch %d: %s",
            body.controller_id,
            body.controller_epoch,
            ErrorCode(stale).name,
        )
        return UpdateMetadataResponse(error_code=stale)
    changed = await broker.store.apply_update_metadata(body)
    for topic, event in sorted(changed.items()):
        if event == "deleted":
            broker.replica_manager.remove_topic(topic)
        broker.controller.notify(event, topic)
    return UpdateMetadataResponse(error_code=ErrorCode.none)
