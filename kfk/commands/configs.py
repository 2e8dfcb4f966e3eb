"""`kfk configs --describe|--alter`: kafka-configs.sh for topics and brokers.

--describe prints the configs set on the entity (dynamic ones), or with --all every config with its value, source
and synonyms. --alter applies --add-config k=v[,k=v] and --delete-config k[,k] in one IncrementalAlterConfigs
request, so a bad key fails the whole change, as in Kafka. ``--entity-default`` (or an empty --entity-name) means
the cluster-wide broker default.
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

app = typer.Typer()

ENTITY_TYPES = {"topics": "TOPIC", "brokers": "BROKER", "broker-loggers": "BROKER_LOGGER"}


@app.command("configs")
def configs(
    describe: Annotated[bool, typer.Option("--describe", help="Show the entity's configs.")] = False,
    alter: Annotated[bool, typer.Option("--alter", help="Change the entity's configs.")] = False,
    entity_type: Annotated[str, typer.Option("--entity-type", help="topics, brokers or broker-loggers.")] = "topics",
    entity_name: Annotated[Optional[str], typer.Option("--entity-name", help="The topic name or broker id.")
                           ] = None,
    entity_default: Annotated[bool, typer.Option("--entity-default", help="The cluster-wide broker default.")
                              ] = False,
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
    """Describe or change topic and broker configs."""
    if describe == alter:
        fail("give exactly one of --describe and --alter")
    kind = ENTITY_TYPES.get(entity_type)
    if kind is None:
        fail(f"--entity-type must be one of {', '.join(ENTITY_TYPES)}, not {entity_type!r}")
    entity_name = _entity_name(kind, entity_name, entity_default)
    additions = parse_key_values(add_config, "--add-config", split_commas=True)
    deletions = [name.strip() for item in delete_config or [] for name in item.split(",") if name.strip()]
    if alter and not additions and not deletions:
        fail("--alter needs --add-config or --delete-config")
    if describe and (additions or deletions):
        fail("--add-config and --delete-config go with --alter")

    with client_errors(debug):
        from kfk.client import Admin, AlterConfigOp, AlterConfigOpType, ConfigResource, ConfigResourceType

        resource = ConfigResource(ConfigResourceType[kind], entity_name)
        label = f"{'topic' if kind == 'TOPIC' else 'broker'} {entity_name}" if entity_name else "default broker"
        with Admin(client_config(bootstrap_server, command_config)) as admin:
            if kind == "TOPIC":
                admin.describe_topics([entity_name])  # "does not exist" before anything else
            if alter:
                ops = [AlterConfigOp(name, value, AlterConfigOpType.SET) for name, value in additions.items()]
                ops += [AlterConfigOp(name, None, AlterConfigOpType.DELETE) for name in deletions]
                error = admin.incremental_alter_configs({resource: ops})[resource]
                if error is not None:
                    raise error
                typer.echo(f"Completed updating config for {label}.")
                return
            entries = admin.describe_configs([resource], include_synonyms=True)[resource]
    _render(entries, label, all_configs, json_output)


def _entity_name(kind: str, entity_name: str | None, entity_default: bool) -> str:
    """The resource name: the topic or broker id, or "" for the cluster-wide broker default."""
    if entity_default:
        if kind == "TOPIC":
            fail("--entity-default applies to brokers, not topics")
        return ""
    if entity_name is None:
        fail("--entity-name (or --entity-default for brokers) is required")
    return entity_name


def _render(entries: dict, label: str, all_configs: bool, json_output: bool) -> None:
    """The dynamic configs (or with --all every config), as kafka-configs.sh prints them or as JSON."""
    shown = {name: entry for name, entry in sorted(entries.items())
             if all_configs or not entry.is_default and entry.source.name.startswith("DYNAMIC")}
    if json_output:
        print_json([{"name": name, "value": None if entry.is_sensitive else entry.value,
                     "source": entry.source.name, "sensitive": entry.is_sensitive, "read_only": entry.is_read_only,
                     "synonyms": [{"name": s, "value": v, "source": src.name} for s, v, src in entry.synonyms]}
                    for name, entry in shown.items()])
        return
    typer.echo(f"{'All' if all_configs else 'Dynamic'} configs for {label} are:")
    for name, entry in shown.items():
        value = "null" if entry.is_sensitive else entry.value
        synonyms = ", ".join(f"{source.name}:{synonym}={'null' if entry.is_sensitive else synonym_value}"
                             for synonym, synonym_value, source in entry.synonyms)
        typer.echo(f"  {name}={value} sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}")
