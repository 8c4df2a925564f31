"""Where cluster metadata is kept: the MetadataStore interface and its local-file version.

A single node is its own controller: ``LocalMetadataStore`` keeps the image in
``odradek-metadata.json`` in the first log dir (written to a temporary file, fsynced,
renamed), so topics, partition counts, topic configs, dynamic broker configs (by entity: a
broker id or ``<default>``) and leader epochs survive restarts.
A ZooKeeper-backed store implements the same methods for a cluster.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from abc import ABC, abstractmethod
from pathlib import Path

from odradek.cluster.metadata_image import BrokerInfo, MetadataImage, PartitionState, TopicInfo
from odradek.protocol import errors

MAX_TOPIC_NAME = 249
DEFAULT_BROKER_ENTITY = "<default>"  # Kafka's name for the cluster-wide default (zk_data.DEFAULT_ENTITY)
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
METADATA_FILE = "odradek-metadata.json"


def validate_topic_name(name: str) -> None:
    """Kafka's rules for topic names; raises InvalidTopicExceptionError naming the problem."""
    if not name:
        raise errors.InvalidTopicExceptionError("topic name is empty")
    if name in (".", ".."):
        raise errors.InvalidTopicExceptionError(f"topic name cannot be '{name}'")
    if len(name) > MAX_TOPIC_NAME:
        raise errors.InvalidTopicExceptionError(f"topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_TOPIC.match(name):
        raise errors.InvalidTopicExceptionError(
            f"topic name '{name}' has characters other than ASCII letters, digits, '.', '_' and '-'"
        )


class MetadataStore(ABC):
    image: MetadataImage

    @abstractmethod
    def create_topic(
        self,
        name: str,
        partitions: int,
        replicas: dict[int, list[int]],
        configs: dict[str, str],
        internal: bool,
    ) -> TopicInfo: ...

    @abstractmethod
    def delete_topic(self, name: str) -> TopicInfo: ...

    @abstractmethod
    def add_partitions(self, name: str, assignments: dict[int, list[int]]) -> TopicInfo: ...

    @abstractmethod
    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None: ...

    @abstractmethod
    def broker_configs(self, entity: str) -> dict[str, str]:
        """The dynamic configs (KIP-226) of one broker (``entity`` is its id, "0") or the
        cluster-wide defaults (``entity`` is ``DEFAULT_BROKER_ENTITY``); {} when none. Kafka
        keeps them in ``/config/brokers/<entity>``."""

    @abstractmethod
    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (see ``broker_configs``); {} removes them."""

    @abstractmethod
    def group_configs(self, group_id: str) -> dict[str, str]:
        """The configs set on one group (GROUP resources, KIP-848/KIP-932); {} when none.
        Kafka keeps them in the metadata log as GROUP ConfigRecords."""

    @abstractmethod
    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace the configs of ``group_id``; {} removes them."""

    @abstractmethod
    def update_partition(self, topic: str, partition: int, state: PartitionState) -> None: ...

    # Security (issue 17). Kafka keeps SCRAM credentials in /config/users/<user> and ACLs in
    # /kafka-acl/<ResourceType>/<name> (literal) and /kafka-acl-extended/prefixed/... (prefixed);
    # zk_data.py has their byte layout. Credentials are stored salted, never as passwords.

    def scram_credentials(self, user: str) -> dict[str, str]:
        """{mechanism: ``ScramCredential.to_text()``} of ``user``; {} when none."""
        raise NotImplementedError(f"{type(self).__name__} keeps no SCRAM credentials")

    def scram_users(self) -> dict[str, dict[str, str]]:
        """Every user with SCRAM credentials: {user: {mechanism: credential text}}."""
        raise NotImplementedError(f"{type(self).__name__} keeps no SCRAM credentials")

    def set_scram_credential(self, user: str, mechanism: str, credential: str | None) -> None:
        """Store (or with None remove) one mechanism's credential of ``user``."""
        raise NotImplementedError(f"{type(self).__name__} keeps no SCRAM credentials")

    def acls(self) -> list[dict]:
        """Every ACL as a dict: resource_type, pattern_type, name, principal, host,
        operation, permission (Kafka's names: "Topic", "LITERAL", "Read", "Allow"...)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no ACLs")

    def set_acls(self, acls: list[dict]) -> None:
        """Replace every ACL (the authorizer computes additions and deletions)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no ACLs")

    async def refresh_users(self, users: list[str]) -> None:
        """Read again, where other brokers write them, the SCRAM credentials of ``users``.
        Nothing to do on a single node."""
        return None

    async def refresh_acls(self, filters: list) -> None:
        """Read again, where other brokers write them, the ACLs of the resources these
        DeleteAcls filters (``acl_model.AclFilter``) name. Nothing to do on a single node."""
        return None

    def client_quotas(self) -> list[tuple[dict, dict]]:
        """Every client quota: ({"user": u, "client-id": c}, {key: float}); a part is a name,
        "<default>" or None (Kafka: /config/users/<u>/clients/<c>, /config/clients/<c>); or
        an IP entity ({"ip": address or "<default>"}, {"connection_creation_rate": n})
        (Kafka: /config/ips/<ip>)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no client quotas")

    def set_client_quota(self, entity: dict, changes: dict) -> None:
        """Set (a number) or remove (None) quota keys of one entity."""
        raise NotImplementedError(f"{type(self).__name__} keeps no client quotas")

    async def written(self) -> bool:
        """Wait until the changes made so far are where the other brokers read them (ZooKeeper
        writes run in the background); False if one failed. A local store writes at once."""
        return True

    @abstractmethod
    def reserve_producer_id_block(self, size: int) -> int:
        """Reserve ``size`` producer ids; return the first."""


class LocalMetadataStore(MetadataStore):
    """Metadata of a single-node cluster, in one JSON file beside the logs."""

    def __init__(self, data_dir: Path, cluster_id: str, node: BrokerInfo):
        self.path = Path(data_dir) / METADATA_FILE
        self.image = MetadataImage(
            cluster_id=cluster_id, controller_id=node.node_id, brokers={node.node_id: node}
        )
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._scram: dict[str, dict[str, str]] = {}
        self._acls: list[dict] = []
        self._quotas: list[dict] = []  # {"entity": {...}, "quotas": {...}}
        self._group_configs: dict[str, dict[str, str]] = {}
        self.next_producer_id = 0
        if self.path.exists():
            data = json.loads(self.path.read_text())
            self.image.topics = {
                name: TopicInfo.from_json(name, t) for name, t in data.get("topics", {}).items()
            }
            self._broker_configs = {
                entity: dict(configs)
                for entity, configs in data.get("broker_configs", {}).items()
                if isinstance(configs, dict)
            }
            self._group_configs = {
                group: dict(configs)
                for group, configs in data.get("group_configs", {}).items()
                if isinstance(configs, dict)
            }
            self.next_producer_id = data.get("next_producer_id", 0)
            self._scram = {u: dict(c) for u, c in data.get("scram_credentials", {}).items()}
            self._acls = [dict(a) for a in data.get("acls", [])]
            self._quotas = [dict(q) for q in data.get("client_quotas", [])]

    def _commit(self, undo) -> None:
        """Persist the image just changed; if the file cannot be written (a full disk), call
        ``undo`` to take the change back and raise KafkaStorageErrorError."""
        try:
            self._save()
        except OSError as exc:
            undo()
            raise errors.KafkaStorageErrorError(
                f"cannot write the cluster metadata {self.path}: {exc.strerror or exc}"
            ) from exc

    def _save(self) -> None:
        data = {
            "version": 1,
            "topics": {name: t.to_json() for name, t in self.image.topics.items()},
            "broker_configs": self._broker_configs,
            "group_configs": self._group_configs,
            "next_producer_id": self.next_producer_id,
            "scram_credentials": self._scram,
            "acls": self._acls,
            "client_quotas": self._quotas,
        }
        tmp = self.path.with_suffix(".tmp")
        try:
            with open(tmp, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, self.path)

    def create_topic(self, name, partitions, replicas, configs, internal=False) -> TopicInfo:
        if name in self.image.topics:
            raise errors.TopicAlreadyExistsError(f"topic '{name}' already exists")
        topic = TopicInfo(
            name,
            uuid.uuid4(),
            {p: PartitionState(r[0], 0, list(r), list(r)) for p, r in replicas.items()},
            dict(configs),
            internal,
        )
        self.image.topics[name] = topic
        self._commit(lambda: self.image.topics.pop(name, None))
        return topic

    def delete_topic(self, name) -> TopicInfo:
        topic = self.image.topics.pop(name, None)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        self._commit(lambda: self.image.topics.__setitem__(name, topic))
        return topic

    def add_partitions(self, name, assignments) -> TopicInfo:
        topic = self.image.topics[name]
        for p, r in assignments.items():
            topic.partitions[p] = PartitionState(r[0], 0, list(r), list(r))

        def undo():
            for p in assignments:
                topic.partitions.pop(p, None)

        self._commit(undo)
        return topic

    def set_topic_configs(self, name, configs) -> None:
        topic = self.image.topics[name]
        old = topic.configs
        topic.configs = dict(configs)
        self._commit(lambda: setattr(topic, "configs", old))

    def broker_configs(self, entity) -> dict[str, str]:
        return dict(self._broker_configs.get(entity, {}))

    def set_broker_configs(self, entity, configs) -> None:
        self._replace(self._broker_configs, entity, configs)

    def group_configs(self, group_id) -> dict[str, str]:
        return dict(self._group_configs.get(group_id, {}))

    def set_group_configs(self, group_id, configs) -> None:
        self._replace(self._group_configs, group_id, configs)

    def _replace(self, level: dict[str, dict[str, str]], name: str, configs: dict[str, str]) -> None:
        old = level.get(name)

        def put(value) -> None:
            if value:
                level[name] = dict(value)
            else:
                level.pop(name, None)

        put(configs)
        self._commit(lambda: put(old))

    def update_partition(self, topic, partition, state) -> None:
        partitions = self.image.topics[topic].partitions
        old = partitions[partition]
        partitions[partition] = state
        self._commit(lambda: partitions.__setitem__(partition, old))

    def reserve_producer_id_block(self, size) -> int:
        start = self.next_producer_id
        self.next_producer_id = start + size
        self._commit(lambda: setattr(self, "next_producer_id", start))
        return start

    def scram_credentials(self, user) -> dict[str, str]:
        return dict(self._scram.get(user, {}))

    def scram_users(self) -> dict[str, dict[str, str]]:
        return {u: dict(c) for u, c in self._scram.items()}

    def set_scram_credential(self, user, mechanism, credential) -> None:
        old = self._scram.get(user)
        new = dict(old or {})
        if credential is None:
            new.pop(mechanism, None)
        else:
            new[mechanism] = credential

        def put(value) -> None:
            if value:
                self._scram[user] = value
            else:
                self._scram.pop(user, None)

        put(new)
        self._commit(lambda: put(old))

    def acls(self) -> list[dict]:
        return [dict(a) for a in self._acls]

    def set_acls(self, acls) -> None:
        old = self._acls
        self._acls = [dict(a) for a in acls]
        self._commit(lambda: setattr(self, "_acls", old))

    def client_quotas(self) -> list[tuple[dict, dict]]:
        return [(dict(q["entity"]), dict(q["quotas"])) for q in self._quotas]

    def set_client_quota(self, entity, changes) -> None:
        old = [dict(q) for q in self._quotas]
        if entity.get("ip") is not None:
            entity = {"ip": entity["ip"]}
        else:
            entity = {"user": entity.get("user"), "client-id": entity.get("client-id")}
        current = next((q for q in self._quotas if q["entity"] == entity), None)
        quotas = dict(current["quotas"]) if current else {}
        for key, value in changes.items():
            if value is None:
                quotas.pop(key, None)
            else:
                quotas[key] = float(value)
        rest = [q for q in self._quotas if q["entity"] != entity]
        self._quotas = rest + ([{"entity": entity, "quotas": quotas}] if quotas else [])
        self._commit(lambda: setattr(self, "_quotas", old))
