"""DescribeCluster (key 60), v0-v2: cluster id, controller and brokers (KIP-700).

v2 (KIP-1073) marks fenced brokers and lists them only when asked: in ZooKeeper mode a broker
is listed once registered and gone when its session ends, so none is ever fenced.
"""

from odradek.broker.handlers import api
from odradek.broker.security.authorizer import cluster_authorized_operations
from odradek.protocol import messages


@api(60, 0, 2)
def handle_describe_cluster(broker, request):
    image = broker.image
    return messages.build_response(
        60,
        request.api_version,
        {
            "throttle_time": 0,
            "error_code": 0,
            "cluster_id": image.cluster_id,
            "controller_id": image.controller_id,
            "cluster_authorized_operations": cluster_authorized_operations(
                broker.authorizer, request, request.body.include_cluster_authorized_operations
            ),
            "brokers": [
                {"broker_id": b.node_id, "host": host, "port": port, "rack": b.rack, "is_fenced": False}
                for b in image.brokers.values()
                for host, port in (b.address(request.listener),)
            ],
        },
    )
