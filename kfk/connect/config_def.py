"""Config definitions as Kafka's ConfigDef has them: typed keys with defaults, validated in Kafka's words.

Connectors, transforms and converters declare their keys with it; the REST API's /config and /config/validate
render the definitions and validation results in Kafka's JSON shapes (`definition_json`, `ConfigValue`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from kfk.connect.errors import ConnectException

#: A key without a default is required (Kafka's ConfigDef.NO_DEFAULT_VALUE).
NO_DEFAULT = object()
TYPES = ("STRING", "INT", "SHORT", "LONG", "DOUBLE", "BOOLEAN", "LIST", "CLASS", "PASSWORD")
INTEGER_BITS = {"SHORT": 16, "INT": 32, "LONG": 64}


class ConfigException(ConnectException):
    """A config value is missing or invalid (the message is Kafka's)."""


Validator = Callable[[str, Any], None]


@dataclass
class ConfigKey:
    name: str
    type: str
    default: Any = NO_DEFAULT
    importance: str = "MEDIUM"
    documentation: str = ""
    group: str | None = None
    order_in_group: int = -1
    width: str = "NONE"
    display_name: str | None = None
    validator: Validator | None = None

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def definition_json(self) -> dict[str, Any]:
        """The key as /connector-plugins/{plugin}/config and config/validate show it (ConfigKeyInfo)."""
        return {"name": self.name, "type": self.type, "required": self.required,
                "default_value": None if self.required else render(self.type, self.default),
                "importance": self.importance, "documentation": self.documentation, "group": self.group,
                "order_in_group": self.order_in_group, "width": self.width,
                "display_name": self.display_name or self.name, "dependents": []}


def render(type: str, value: Any) -> str | None:
    """A parsed value as Kafka prints it in the REST API (ConfigDef.convertToString)."""
    if value is None:
        return None
    if type == "LIST":
        return ",".join(value)
    if type == "BOOLEAN":
        return "true" if value else "false"
    return str(value)


def parse_value(key: ConfigKey, value: Any) -> Any:
    """Kafka's ConfigDef.parseType: a string (or already typed value) into the key's type, or ConfigException."""
    if value is None:
        return None
    def invalid(reason: str) -> ConfigException:
        return ConfigException(f"Invalid value {value} for configuration {key.name}: {reason}")
    kind = key.type
    if kind in ("STRING", "CLASS", "PASSWORD"):
        if not isinstance(value, str):
            raise invalid("Expected value to be a string, but it was a " + type(value).__name__)
        return value.strip() if kind != "PASSWORD" else value
    if kind in INTEGER_BITS:
        if isinstance(value, str):
            try:
                value_int = int(value.strip())
            except ValueError:
                raise invalid(f"Not a number of type {kind}") from None
        elif isinstance(value, int) and not isinstance(value, bool):
            value_int = value
        else:
            raise invalid(f"Expected value to be a {kind.lower()}, but it was a " + type(value).__name__)
        bits = INTEGER_BITS[kind]
        if not -(1 << (bits - 1)) <= value_int < (1 << (bits - 1)):
            raise invalid(f"Not a number of type {kind}")
        return value_int
    if kind == "DOUBLE":
        try:
            return float(value)
        except (TypeError, ValueError):
            raise invalid("Not a number of type DOUBLE") from None
    if kind == "BOOLEAN":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise invalid("Expected value to be either true or false")
    if kind == "LIST":
        if isinstance(value, (list, tuple)):
            return [str(item) for item in value]
        text = str(value).strip()
        return [item.strip() for item in text.split(",")] if text else []
    raise ValueError(f"unknown config type {kind}")


class ConfigDef:
    """An ordered set of ConfigKeys; `parse` gives the typed values or raises the first error, `validate_all` gives
    every key's errors (what config/validate reports)."""

    def __init__(self, keys: Iterable[ConfigKey] = ()) -> None:
        self.keys: dict[str, ConfigKey] = {}
        for key in keys:
            self.define(key)

    def define(self, key: ConfigKey) -> ConfigDef:
        if key.name in self.keys:
            raise ConfigException(f"Configuration {key.name} is defined twice.")
        self.keys[key.name] = key
        return self

    def merged(self, other: ConfigDef) -> ConfigDef:
        merged = ConfigDef(self.keys.values())
        for key in other.keys.values():
            if key.name not in merged.keys:
                merged.define(key)
        return merged

    def _value_of(self, key: ConfigKey, props: Mapping[str, Any]) -> Any:
        if key.name in props:
            value = parse_value(key, props[key.name])
        elif key.required:
            raise ConfigException(f'Missing required configuration "{key.name}" which has no default value.')
        else:
            value = key.default
        if key.validator is not None:
            key.validator(key.name, value)
        return value

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        return {key.name: self._value_of(key, props) for key in self.keys.values()}

    def validate_all(self, props: Mapping[str, Any]) -> dict[str, tuple[Any, list[str]]]:
        """Each key's parsed value (None when invalid) and error messages."""
        results: dict[str, tuple[Any, list[str]]] = {}
        for key in self.keys.values():
            try:
                results[key.name] = (self._value_of(key, props), [])
            except ConfigException as error:
                results[key.name] = (None, [str(error)])
        return results


# --- validators (Kafka's ConfigDef validators, with their messages) ------------------------------------------------

def at_least(minimum: int) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None or value < minimum:
            raise ConfigException(f"Invalid value {value} for configuration {name}: Value must be at least {minimum}")
    return check


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value not in allowed:
            raise ConfigException(f"Invalid value {value} for configuration {name}: String must be one of: "
                                  + ", ".join(allowed))
    return check


def non_empty_string(name: str, value: Any) -> None:
    if value is not None and not value:
        raise ConfigException(f"Invalid value {value} for configuration {name}: String may not be empty")


def valid_regex(name: str, value: Any) -> None:
    if value:
        try:
            re.compile(value)
        except re.error as error:
            raise ConfigException(f"Invalid value {value} for configuration {name}: {error}") from None


@dataclass
class ConfigInfos:
    """config/validate's answer (Kafka's ConfigInfos)."""
    name: str
    configs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def error_count(self) -> int:
        return sum(1 for config in self.configs if config["value"]["errors"])

    def to_json(self) -> dict[str, Any]:
        groups: list[str] = []
        for config in self.configs:
            group = config["definition"]["group"]
            if group is not None and group not in groups:
                groups.append(group)
        return {"name": self.name, "error_count": self.error_count, "groups": groups, "configs": self.configs}


def config_value_json(key: ConfigKey, raw: Any, errors: list[str], recommended: list[str] | None = None
                      ) -> dict[str, Any]:
    value = raw if raw is None or isinstance(raw, str) else render(key.type, raw)
    return {"definition": key.definition_json(),
            "value": {"name": key.name, "value": value, "recommended_values": recommended or [], "errors": errors,
                      "visible": True}}
