"""Confluent's registry errors: each an HTTP status and an ``error_code`` for the JSON body."""

from __future__ import annotations


class RegistryError(Exception):
    """An error the REST API answers with ``{"error_code": code, "message": message}``."""

    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(what: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, what)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40404, f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently"
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted. Set permanent=true to delete permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first before being permanently deleted",
    )


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible(message: str) -> RegistryError:
    return RegistryError(409, 409, message)


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {message}")


def invalid_version(version) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are between "
        "[1, 2^31-1] and the string \"latest\"",
    )


def invalid_compatibility_level(level) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level {level!r}. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive",
    )


def invalid_mode(mode) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY and IMPORT")


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(message: str) -> RegistryError:
    return RegistryError(422, 42206, message)


def id_in_use(message: str) -> RegistryError:
    return RegistryError(422, 42207, message)


def unprocessable(message: str) -> RegistryError:
    """A request body that is not what the endpoint takes (Confluent's 422 with code 422)."""
    return RegistryError(422, 422, message)


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {message}")


def store_timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, f"Timed out writing to the backend data store: {message}")


def forwarding_error(message: str) -> RegistryError:
    return RegistryError(500, 50003, f"Error while forwarding the request to the leader: {message}")


def unknown_leader(message: str) -> RegistryError:
    return RegistryError(500, 50004, f"Unknown leader: {message}")
