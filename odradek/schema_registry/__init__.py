"""A schema registry that Confluent's clients use unchanged: a client of the broker, never part of it.

* ``registry_errors``: Confluent's error codes as exceptions carrying their HTTP status;
* ``schema_records``: the key and value JSON of the ``_schemas`` topic (Confluent's formats);
* ``registry_state``: the in-memory view those records build (no I/O);
* ``schemas_topic``: reads ``_schemas`` to the end and writes to it (odradek.client);
* ``schema_types``: parsing and canonical forms per schema type (``avro_schema``);
* ``compatibility`` and ``avro_compatibility``: the checks, pure functions returning reasons;
* ``registry``: the operations (register, look up, delete, configs, modes);
* ``rest_api``: the REST API v1 (aiohttp) over ``registry``;
* ``registry_config`` and ``registry_server``: Confluent's properties and running it.
"""
