"""JAAS configuration text, as Kafka's `sasl.jaas.config` holds it:
`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret"
user_alice="alice-secret";` — one or more login modules, each a class name, a control flag and options, ended by
a semicolon. Values may be quoted (a quoted value may hold spaces, `;` and `\\"`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<symbol>[=;]))')


@dataclass(frozen=True, slots=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str]


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        if not text[position:].strip():
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"unexpected character {text[position:].lstrip()[:1]!r} in the JAAS config")
        position = match.end()
        if match["quoted"] is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", match["quoted"][1:-1])))
        elif match["word"] is not None:
            tokens.append(("word", match["word"]))
        else:
            tokens.append(("symbol", match["symbol"]))
    return tokens


def parse_jaas_config(text: str) -> list[LoginModule]:
    """The login modules of a `sasl.jaas.config` value; ValueError naming what is wrong (Kafka's "Invalid JAAS
    config" cases: no module, no flag, a missing semicolon, an option without a value)."""
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    index = 0
    while index < len(tokens):
        kind, class_name = tokens[index]
        if kind != "word":
            raise ValueError(f"Invalid JAAS config: expected a login module class, got {class_name!r}")
        if index + 1 >= len(tokens) or tokens[index + 1][1].lower() not in _FLAGS:
            raise ValueError(f"Invalid JAAS config: login module control flag not specified after {class_name}")
        flag = tokens[index + 1][1].lower()
        index += 2
        options: dict[str, str] = {}
        while True:
            if index >= len(tokens):
                raise ValueError("Invalid JAAS config: the login module options do not end with ';'")
            kind, value = tokens[index]
            if (kind, value) == ("symbol", ";"):
                index += 1
                break
            if kind != "word" or index + 2 >= len(tokens) or tokens[index + 1] != ("symbol", "=") \
                    or tokens[index + 2][0] == "symbol":
                raise ValueError(f"Invalid JAAS config: option {value!r} is not name=value")
            options[value] = tokens[index + 2][1]
            index += 3
        modules.append(LoginModule(class_name, flag, options))
    if not modules:
        raise ValueError("Invalid JAAS config: no login module")
    return modules


def plain_users(module: LoginModule) -> dict[str, str]:
    """The users a broker's PlainLoginModule declares: its `user_<name>="<password>"` options."""
    return {name[len("user_"):]: password for name, password in module.options.items() if name.startswith("user_")}
