"""Kafka's ``sasl.jaas.config`` line: ``<LoginModule> <flag> key=value ... ;``.

The syntax is JAAS's as Kafka reads it (``JaasConfig``): one or more login modules, each a
class name, a control flag (required, requisite, sufficient, optional), options as
``name=value`` where the value is a double-quoted string (backslash escapes) or a bare word,
and a closing ``;``. A broker listener's ``listener.name.<l>.<mechanism>.sasl.jaas.config``
must hold exactly one module. Messages never show option values (they hold passwords).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    pass


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str):
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            yield c
            i += 1
        elif c == '"':
            i += 1
            out = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                out.append(text[i])
                i += 1
            if i >= n:
                raise JaasError("a quoted value is not closed")
            i += 1
            yield ("quoted", "".join(out))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            yield ("word", text[start:i])


def parse_jaas_config(text: str) -> list[LoginModule]:
    """The login modules of a ``sasl.jaas.config`` value; ``JaasError`` says what is wrong."""
    tokens = list(_tokens(text))
    modules: list[LoginModule] = []
    i = 0

    def word(what: str) -> str:
        nonlocal i
        if i >= len(tokens) or not isinstance(tokens[i], tuple) or tokens[i][0] != "word":
            raise JaasError(f"expected {what}")
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens):
        class_name = word("a login module class name")
        flag = word("a control flag (required, requisite, sufficient or optional)")
        if flag.lower() not in FLAGS:
            raise JaasError(f"invalid control flag {flag!r}; expected one of {', '.join(FLAGS)}")
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ";":
            name = word("an option name or ';'")
            if i >= len(tokens) or tokens[i] != "=":
                raise JaasError(f"option {name} has no '=value'")
            i += 1
            if i >= len(tokens) or not isinstance(tokens[i], tuple):
                raise JaasError(f"option {name} has no value")
            options[name] = tokens[i][1]
            i += 1
        if i >= len(tokens):
            raise JaasError("the login module is not closed with ';'")
        i += 1
        modules.append(LoginModule(class_name, flag.lower(), options))
    if not modules:
        raise JaasError("no login module")
    return modules


def client_credentials(text: str) -> tuple[str, str]:
    """(username, password) of a client's PLAIN or SCRAM ``sasl.jaas.config``."""
    module = parse_jaas_config(text)[0]
    try:
        return module.options["username"], module.options["password"]
    except KeyError:
        raise JaasError("the login module needs username=\"...\" and password=\"...\"") from None
