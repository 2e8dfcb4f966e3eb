"""`kfk configs --describe|--alter`: kafka-configs.sh for topics, brokers, broker loggers, groups and client quotas.

The entity is named as in Kafka 3.x+: `--topic T`, `--broker ID`, `--broker-defaults` (the cluster-wide dynamic
broker default), `--broker-logger ID`, `--group G`, or the older `--entity-type topics|brokers|broker-loggers|groups`
with `--entity-name` / `--entity-default`. Without a name, --describe shows every topic, group or broker (then, for
brokers, the default), as Kafka does.

--describe prints the configs set on the entity (dynamic ones), or with --all every config with its value, source
and synonyms; a broker logger's configs are its loggers and their levels. A value that is not set prints as `null`,
as Kafka prints it. --alter applies --add-config k=v[,k=v] and --delete-config k[,k] in one
IncrementalAlterConfigs request, so a bad key fails the whole change, as in Kafka. Users and clients are client
quota entities (kfk/commands/quota_configs.py), and a user's SCRAM-SHA-256/512 keys its SCRAM credentials
(kfk/commands/scram_configs.py): one --alter may change both, and --describe of users prints both, as
kafka-configs.sh does. A group's configs (`--group G`, `--entity-type groups`) override the broker's group.* settings
for that group (share.auto.offset.reset, consumer.session.timeout.ms...). kfk keeps no ip quotas and no client
metrics: `--entity-type ips|client-metrics` says so in one line.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    Debug,
    JsonOutput,
    client_config,
    client_errors,
    parse_key_values,
    print_json,
)
from kfk.commands.errors import fail
from kfk.commands.quota_configs import QUOTA_ENTITY_TYPES, quota_configs, quota_entity
from kfk.commands.scram_configs import SCRAM_MECHANISMS, scram_configs

app = typer.Typer()

#: --entity-type -> (ConfigResourceType name, the singular Kafka prints in "Dynamic configs for <singular> <name>").
ENTITY_TYPES = {"topics": ("TOPIC", "topic"), "brokers": ("BROKER", "broker"),
                "broker-loggers": ("BROKER_LOGGER", "broker-logger"), "groups": ("GROUP", "group")}
#: Entity types of kafka-configs.sh that kfk has nothing for (ip quotas, client metrics).
UNSUPPORTED_ENTITY_TYPES = ("ips", "client-metrics")
#: The names Kafka's Admin gives the config sources kfk's wire enum names otherwise (what kafka-configs.sh prints).
_SOURCE_NAMES = {"GROUP_CONFIG": "DYNAMIC_GROUP_CONFIG", "CLIENT_METRICS_CONFIG": "DYNAMIC_CLIENT_METRICS_CONFIG"}


@app.command("configs")
def configs(
    describe: Annotated[bool, typer.Option("--describe", help="Show the entity's configs.")] = False,
    alter: Annotated[bool, typer.Option("--alter", help="Change the entity's configs.")] = False,
    topic: Annotated[Optional[str], typer.Option(
        "--topic", help="The topic (same as --entity-type topics --entity-name).")] = None,
    broker: Annotated[Optional[str], typer.Option(
        "--broker", help="The broker id (--entity-type brokers --entity-name).")] = None,
    broker_defaults: Annotated[bool, typer.Option(
        "--broker-defaults", help="The cluster-wide dynamic broker default (brokers, --entity-default).")] = False,
    broker_logger: Annotated[Optional[str], typer.Option(
        "--broker-logger", help="The broker id whose loggers to show or change (--entity-type broker-loggers).")
    ] = None,
    group: Annotated[Optional[str], typer.Option(
        "--group", help="A group's configs (--entity-type groups --entity-name).")] = None,
    user: Annotated[Optional[str], typer.Option(
        "--user", help="A user's client quotas (with --client: for that client-id).")] = None,
    client: Annotated[Optional[str], typer.Option("--client", help="A client-id's client quotas.")] = None,
    user_defaults: Annotated[bool, typer.Option(
        "--user-defaults", help="The default user's client quotas.")] = False,
    client_defaults: Annotated[bool, typer.Option(
        "--client-defaults", help="The default client-id's client quotas.")] = False,
    entity_type: Annotated[Optional[str], typer.Option(
        "--entity-type", help="topics, brokers, broker-loggers, groups, users (quotas, SCRAM credentials) or "
                              "clients.")
    ] = None,
    entity_name: Annotated[Optional[str], typer.Option(
        "--entity-name", help="The topic name, broker id, group id, user or client-id.")] = None,
    entity_default: Annotated[bool, typer.Option(
        "--entity-default", help="With brokers: the cluster-wide dynamic default; with users or clients: the "
                                 "default entity.")] = False,
    add_config: Annotated[Optional[list[str]], typer.Option(
        "--add-config", help="k=v[,k=v...] to set (list values in brackets: k=[a,b]); repeatable.")] = None,
    delete_config: Annotated[Optional[list[str]], typer.Option(
        "--delete-config", help="k[,k...] to remove (back to the default); repeatable.")] = None,
    all_configs: Annotated[bool, typer.Option("--all", help="With --describe: every config, defaults included.")
                           ] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """Describe or change topic, broker, broker-logger, group and client quota configs."""
    if describe == alter:
        fail("give exactly one of --describe and --alter")
    quota_parts = quota_entity(user, client, user_defaults, client_defaults, entity_type, entity_name,
                               entity_default)
    if quota_parts is None:
        kind, names = _entity(topic, broker, broker_defaults, broker_logger, group, entity_type, entity_name,
                              entity_default)
    additions = parse_key_values(add_config, "--add-config", split_commas=True)
    deletions = [name.strip() for item in delete_config or [] for name in item.split(",") if name.strip()]
    if alter and not additions and not deletions:
        fail("--alter needs --add-config or --delete-config")
    if describe and (additions or deletions):
        fail("--add-config and --delete-config go with --alter")
    if quota_parts is not None:
        if topic is not None or broker is not None or broker_defaults or broker_logger is not None or \
                group is not None:
            fail("name one entity: client quotas (--user/--client) or a topic, broker, broker logger or group")
        _users_and_clients(quota_parts, alter, additions, deletions, bootstrap_server, command_config, json_output,
                           debug)
        return
    if alter and names is None:
        fail("--alter needs an entity name (--topic, --broker, --broker-defaults, --broker-logger, --group or "
             "--entity-name)")

    with client_errors(debug):
        from kfk.client import Admin, AlterConfigOp, AlterConfigOpType, ConfigResource, ConfigResourceType

        with Admin(client_config(bootstrap_server, command_config)) as admin:
            every = names is None
            if every:  # every topic or group, or every broker and then the default
                names = sorted(admin.list_topics()) if kind == "TOPIC" else sorted(
                    listing.group_id for listing in admin.list_consumer_groups()) if kind == "GROUP" else [
                    str(broker_id) for broker_id in sorted(node.node_id for node in admin.describe_cluster().brokers)]
                if kind == "BROKER":
                    names.append("")
            elif kind == "TOPIC":
                admin.describe_topics(names)  # "does not exist" before anything else
            resources = [ConfigResource(ConfigResourceType[kind], name) for name in names]
            if alter:
                ops = [AlterConfigOp(name, value, AlterConfigOpType.SET) for name, value in additions.items()]
                ops += [AlterConfigOp(name, None, AlterConfigOpType.DELETE) for name in deletions]
                error = admin.incremental_alter_configs({resources[0]: ops})[resources[0]]
                if error is not None:
                    raise error
                typer.echo("Completed updating default config for brokers in the cluster." if kind == "BROKER"
                           and not names[0] else f"Completed updating config for {_singular(kind)} {names[0]}.")
                return
            described = admin.describe_configs(resources, include_synonyms=True)
    if json_output:  # one entity: its entries; every topic or broker: the entries by name ("" the default)
        entries = {resource.name: _json_entries(described[resource], kind, resource.name, all_configs)
                   for resource in resources}
        print_json(entries if every else entries[resources[0].name])
        return
    for resource in resources:
        _render(described[resource], kind, resource.name, all_configs)


def _users_and_clients(parts: list[tuple[str, str | None]], alter: bool, additions: dict[str, str],
                       deletions: list[str], bootstrap_server: str, command_config: str | None, json_output: bool,
                       debug: bool) -> None:
    """A user's or client-id's quotas and, for a user alone, its SCRAM credentials (kafka-configs.sh changes and
    describes both for `--entity-type users`)."""
    user_only = len(parts) == 1 and parts[0][0] == "user"
    user = parts[0][1] if user_only else None  # None: every user; "": the default user (it has no credentials)
    scram_additions = {key: value for key, value in additions.items() if key in SCRAM_MECHANISMS}
    scram_deletions = [key for key in deletions if key in SCRAM_MECHANISMS]
    if (scram_additions or scram_deletions) and not user:
        fail(f"{' and '.join(SCRAM_MECHANISMS)} are credentials of a user: --entity-type users --entity-name")
    quota_additions = {key: value for key, value in additions.items() if key not in scram_additions}
    quota_deletions = [key for key in deletions if key not in scram_deletions]
    common = (bootstrap_server, command_config, json_output, debug)
    if not alter:
        quota_configs(parts, False, {}, [], *common)
        if user_only and user != "" and not json_output:
            scram_configs(user, False, {}, [], *common)
    elif quota_additions or quota_deletions:
        quota_configs(parts, True, quota_additions, quota_deletions, *common,
                      announce=not (scram_additions or scram_deletions))
    if alter and (scram_additions or scram_deletions):
        scram_configs(user, True, scram_additions, scram_deletions, *common)


def _entity(topic: str | None, broker: str | None, broker_defaults: bool, broker_logger: str | None,
            group: str | None, entity_type: str | None, entity_name: str | None,
            entity_default: bool) -> tuple[str, list[str] | None]:
    """The resource type and the names (None: every entity of the type), from whichever flags name them."""
    shortcuts = [(kind, name) for kind, name in (("topics", topic), ("brokers", broker),
                                                 ("brokers", "" if broker_defaults else None),
                                                 ("broker-loggers", broker_logger), ("groups", group))
                 if name is not None]
    if len(shortcuts) > 1 or shortcuts and (entity_type or entity_name is not None or entity_default):
        fail("name one entity: one of --topic, --broker, --broker-defaults, --broker-logger, --group, or "
             "--entity-type with --entity-name/--entity-default")
    if shortcuts:
        entity_type, name = shortcuts[0]
    else:
        entity_type = entity_type or "topics"
        if entity_default and entity_name is not None:
            fail("give --entity-name or --entity-default, not both")
        name = "" if entity_default else entity_name
    if entity_type not in ENTITY_TYPES:
        fail(f"--entity-type must be one of {', '.join([*ENTITY_TYPES, *QUOTA_ENTITY_TYPES])}, not {entity_type!r}"
             + (" (kfk keeps no ip quotas or client metrics)" if entity_type in UNSUPPORTED_ENTITY_TYPES else ""))
    kind = ENTITY_TYPES[entity_type][0]
    if name == "" and kind != "BROKER":
        fail(f"--entity-default applies to brokers, not {entity_type}")
    if name is not None and kind not in ("TOPIC", "GROUP") and name and not name.isdigit():
        fail(f"a broker is named by its id (a number), not {name!r}")
    return kind, None if name is None else [name]


def _singular(kind: str) -> str:
    return next(singular for resource_type, singular in ENTITY_TYPES.values() if resource_type == kind)


def _shown(entries: dict, kind: str, name: str, show_all: bool) -> dict:
    """Every config by name, or (as Kafka) those whose source is the entity's own: the topic's overrides, this
    broker's dynamic configs, the cluster-wide default's, a broker logger's levels."""
    source = {"TOPIC": "DYNAMIC_TOPIC_CONFIG", "BROKER_LOGGER": "DYNAMIC_BROKER_LOGGER_CONFIG", "GROUP": "GROUP_CONFIG",
              "BROKER": "DYNAMIC_BROKER_CONFIG" if name else "DYNAMIC_DEFAULT_BROKER_CONFIG"}[kind]
    return {config_name: entry for config_name, entry in sorted(entries.items())
            if show_all or entry.source.name == source}


def _json_entries(entries: dict, kind: str, name: str, show_all: bool) -> list[dict]:
    return [{"name": config_name, "value": None if entry.is_sensitive else entry.value,
             "source": _source_name(entry.source), "sensitive": entry.is_sensitive, "read_only": entry.is_read_only,
             "synonyms": [{"name": s, "value": v, "source": _source_name(src)} for s, v, src in entry.synonyms]}
            for config_name, entry in _shown(entries, kind, name, show_all).items()]


def _source_name(source) -> str:
    return _SOURCE_NAMES.get(source.name, source.name)


def _value(value: str | None, sensitive: bool) -> str:
    """A value as kafka-configs.sh prints it: null when sensitive or not set."""
    return "null" if sensitive or value is None else value


def _render(entries: dict, kind: str, name: str, all_configs: bool) -> None:
    """kafka-configs.sh's lines: a header, then `  name=value sensitive=... synonyms={SOURCE:name=value, ...}`."""
    if kind == "BROKER" and not name:
        typer.echo("Default configs for brokers in the cluster are:")
    else:
        typer.echo(f"{'All' if all_configs else 'Dynamic'} configs for {_singular(kind)} {name} are:")
    for config_name, entry in _shown(entries, kind, name, all_configs).items():
        synonyms = ", ".join(f"{_source_name(source)}:{synonym}={_value(synonym_value, entry.is_sensitive)}"
                             for synonym, synonym_value, source in entry.synonyms)
        typer.echo(f"  {config_name}={_value(entry.value, entry.is_sensitive)} "
                   f"sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}")
