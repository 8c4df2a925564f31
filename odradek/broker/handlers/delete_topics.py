"""DeleteTopics (key 20), v1-v6.

Deletes by name, or by topic id (v6). Internal topics cannot be deleted; with
``delete.topic.enable=false`` every deletion fails with TOPIC_DELETION_DISABLED.
In cluster mode the active controller asks for the deletion in ZooKeeper and answers once its
metadata no longer has the topic (others answer NOT_CONTROLLER).
"""

from odradek.broker.handlers import api, cluster_admin
from odradek.protocol import errors, messages


@api(20, 1, 6)
async def handle_delete_topics(broker, request):
    body = request.body
    if request.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    responses = []
    for name, topic_id in wanted:
        entry = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
        try:
            if name is None and topic_id is not None:
                topic = broker.image.topic_by_id(topic_id)
                if topic is None:
                    raise errors.UnknownTopicIdError(f"no topic with id {topic_id}")
                name = entry["name"] = topic.name
            if not broker.allowed(request, "Delete", "Topic", name):
                raise errors.TopicAuthorizationFailedError(f"not authorized to delete {name}")
            topic = broker.image.topics.get(name)
            if topic is not None:
                entry["topic_id"] = topic.topic_id
                if topic.internal:
                    raise errors.InvalidRequestError(f"internal topic '{name}' cannot be deleted")
            if not broker.config.get("delete.topic.enable"):
                raise errors.TopicDeletionDisabledError("delete.topic.enable is false")
            if broker.cluster is not None:
                cluster_admin.require_controller(broker)
                await broker.controller.delete_topic_and_wait(name, cluster_admin.timeout_s(body))
            else:
                broker.controller.delete_topic(name)
        except errors.KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return messages.build_response(20, request.api_version, {"throttle_time": 0, "responses": responses})
