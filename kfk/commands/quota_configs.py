"""`kfk configs` for client quotas: kafka-configs.sh's users and clients entities (`--entity-type users|clients`,
`--user`, `--client`, `--user-defaults`, `--client-defaults`; a user and a client together name the user's quota for
that client-id).

--alter sends one AlterClientQuotas for the entity: --add-config values are numbers (a value that is not is refused
here, in Kafka's words), --delete-config removes keys; the broker refuses keys that are not quotas
(INVALID_REQUEST). --describe asks DescribeClientQuotas for exactly the named entity types (Kafka's
ClientQuotaFilter.containsOnly): a name matches that entity, a default the <default> one, no name every entity of
the type; each entity prints as kafka-configs.sh prints it, `Quota configs for client-id 'c1' are
producer_byte_rate=1048576.0`.
"""

from __future__ import annotations

import typer

from kfk.commands.client_options import client_config, client_errors, print_json
from kfk.commands.errors import fail
from kfk.commands.java_text import java_double

#: kafka-configs.sh's entity type -> the client quota entity type, and how its describe line names one.
QUOTA_ENTITY_TYPES = {"users": ("user", "user-principal"), "clients": ("client-id", "client-id")}


def quota_entity(user: str | None, client: str | None, user_defaults: bool, client_defaults: bool,
                 entity_type: str | None, entity_name: str | None, entity_default: bool
                 ) -> list[tuple[str, str | None]] | None:
    """The quota entity the flags name, as (entity type, name) with "" for a default and None for every entity of
    the type (--describe only); None when the flags name no quota entity."""
    parts: list[tuple[str, str | None]] = []
    for kind, name, default in (("user", user, user_defaults), ("client-id", client, client_defaults)):
        if name is not None and default:
            fail(f"give --{'user' if kind == 'user' else 'client'} or its --*-defaults flag, not both")
        if name is not None or default:
            parts.append((kind, "" if default else name))
    if entity_type in QUOTA_ENTITY_TYPES:
        if parts:
            fail("name the quota entity with --user/--client or with --entity-type, not both")
        if entity_default and entity_name is not None:
            fail("give --entity-name or --entity-default, not both")
        parts.append((QUOTA_ENTITY_TYPES[entity_type][0], "" if entity_default else entity_name))
    elif parts and entity_type is not None:
        fail("--user and --client name client quota entities, not " + entity_type)
    return parts or None


def quota_configs(parts: list[tuple[str, str | None]], alter: bool, additions: dict[str, str], deletions: list[str],
                  bootstrap_server: str, command_config: str | None, json_output: bool, debug: bool,
                  announce: bool = True) -> None:
    """--alter (saying so when `announce`) or --describe the quotas of the entity `parts` names."""
    if alter and any(name is None for _, name in parts):
        fail("--alter needs an entity name (--entity-name or --entity-default)")
    ops: dict[str, float | None] = {}
    for key, value in additions.items():
        try:
            ops[key] = float(value)
        except ValueError:
            fail(f"Cannot parse quota configuration value for {key}: {value}")
    ops.update((key, None) for key in deletions)
    with client_errors(debug):
        from kfk.client import Admin, ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilterComponent

        with Admin(client_config(bootstrap_server, command_config)) as admin:
            if alter:
                entity = ClientQuotaEntity.of((kind, name or None) for kind, name in parts)
                error = admin.alter_client_quotas([ClientQuotaAlteration(entity, ops)])[entity]
                if error is not None:
                    raise error
                kind, name = parts[0]
                plural = "users" if kind == "user" else "clients"
                if announce:
                        typer.echo(f"Completed updating config for {plural[:-1]} {name}." if name else
                               f"Completed updating default config for {plural} in the cluster.")
                return
            components = [ClientQuotaFilterComponent.of_entity_type(kind) if name is None else
                          ClientQuotaFilterComponent.of_default_entity(kind) if name == "" else
                          ClientQuotaFilterComponent.of_entity(kind, name) for kind, name in parts]
            described = admin.describe_client_quotas(components, strict=True)
    entities = sorted(described, key=lambda entity: entity.sort_key())
    if json_output:
        print_json([{"entity": entity.as_dict(), "quotas": dict(sorted(described[entity].items()))}
                    for entity in entities])
        return
    for entity in entities:
        names = entity.as_dict()
        label = {kind: label for kind, label in QUOTA_ENTITY_TYPES.values()}
        who = ", ".join(f"{label[kind]} '{names[kind]}'" if names[kind] is not None else f"the default {label[kind]}"
                        for kind in ("user", "client-id") if kind in names)
        values = ", ".join(f"{key}={java_double(value)}" for key, value in sorted(described[entity].items()))
        typer.echo(f"Quota configs for {who} are {values}")
