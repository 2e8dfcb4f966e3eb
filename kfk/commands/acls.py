"""`kfk acls --add|--remove|--list`: kafka-acls.sh, with its flags and its output.

Resources: --topic, --group, --transactional-id, --delegation-token, --user-principal (a user as the resource of
CreateTokens and DescribeTokens; each repeatable) and --cluster, with
--resource-pattern-type (literal or prefixed for --add; also any and match for --list and --remove). Entries:
--allow-principal / --deny-principal with --allow-host / --deny-host (default `*`) and --operation (default All).
The conveniences --producer (Write, Describe, Create on the topics; Write, Describe on the transactional ids;
IdempotentWrite on the cluster with --idempotent) and --consumer (Read, Describe on the topics, Read on the groups)
build the usual sets. --remove without principals removes every ACL of the resource, and asks first unless --force.
The lines are Kafka 4.0's: --add says what it adds and --remove only asks, neither lists the ACLs afterwards (Kafka
3.x's tool did).
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    Debug,
    client_config,
    client_errors,
)
from kfk.commands.errors import fail
from kfk.security.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_title,
)
from kfk.security.principal import KafkaPrincipal

app = typer.Typer()


@app.command("acls")
def acls(
    add: Annotated[bool, typer.Option("--add", help="Add the ACLs.")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Remove the ACLs.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the ACLs (of the resources given, else all).")] = False,
    topic: Annotated[Optional[list[str]], typer.Option("--topic", help="A topic (repeatable).")] = None,
    group: Annotated[Optional[list[str]], typer.Option("--group", help="A consumer group (repeatable).")] = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The cluster.")] = False,
    transactional_id: Annotated[Optional[list[str]], typer.Option(
        "--transactional-id", help="A transactional id (repeatable).")] = None,
    delegation_token: Annotated[Optional[list[str]], typer.Option(
        "--delegation-token", help="A delegation token id (repeatable).")] = None,
    user_principal: Annotated[Optional[list[str]], typer.Option(
        "--user-principal", metavar="PRINCIPAL",
        help="A user principal as the resource (User:alice), e.g. for CreateTokens or DescribeTokens "
             "(repeatable).")] = None,
    resource_pattern_type: Annotated[Optional[str], typer.Option(
        "--resource-pattern-type",
        help="literal (the default) or prefixed; with --list and --remove also any or match.")] = None,
    allow_principal: Annotated[Optional[list[str]], typer.Option(
        "--allow-principal", help="Type:name (User:alice, User:* for everyone) to allow (repeatable).")] = None,
    deny_principal: Annotated[Optional[list[str]], typer.Option(
        "--deny-principal", help="Type:name to deny (repeatable).")] = None,
    allow_host: Annotated[Optional[list[str]], typer.Option(
        "--allow-host", help="Host the allowed principals connect from (default *).")] = None,
    deny_host: Annotated[Optional[list[str]], typer.Option(
        "--deny-host", help="Host the denied principals connect from (default *).")] = None,
    operation: Annotated[Optional[list[str]], typer.Option(
        "--operation", help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                            "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens or All (default All; "
                            "repeatable).")] = None,
    producer: Annotated[bool, typer.Option("--producer", help="The ACLs a producer needs.")] = False,
    consumer: Annotated[bool, typer.Option("--consumer", help="The ACLs a consumer needs.")] = False,
    idempotent: Annotated[bool, typer.Option(
        "--idempotent", help="With --producer: IdempotentWrite on the cluster too.")] = False,
    principal: Annotated[Optional[list[str]], typer.Option(
        "--principal", help="With --list: only the ACLs of this principal (repeatable).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Do not ask before removing.")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Add, remove or list ACLs (kafka-acls.sh)."""
    if add + remove + list_ != 1:
        fail("give exactly one of --add, --remove and --list")
    pattern_type = _pattern_type(resource_pattern_type, add)
    resources = [(ResourceType.TOPIC, name) for name in topic or ()] + \
        [(ResourceType.GROUP, name) for name in group or ()] + \
        [(ResourceType.TRANSACTIONAL_ID, name) for name in transactional_id or ()] + \
        [(ResourceType.DELEGATION_TOKEN, name) for name in delegation_token or ()] + \
        [(ResourceType.USER, _principal(name, "--user-principal")) for name in user_principal or ()] + \
        ([(ResourceType.CLUSTER, CLUSTER_NAME)] if cluster else [])
    if (producer or consumer) and not add and not remove:
        fail("--producer and --consumer go with --add or --remove")
    if producer and consumer:
        fail("give --producer or --consumer, not both")
    if idempotent and not producer:
        fail("--idempotent goes with --producer")
    if principal and not list_:
        fail("--principal goes with --list")
    allowed = [_principal(text, "--allow-principal") for text in allow_principal or ()]
    denied = [_principal(text, "--deny-principal") for text in deny_principal or ()]
    if (allow_host and not allowed) or (deny_host and not denied):
        fail("--allow-host and --deny-host need --allow-principal / --deny-principal")
    operations = [_operation(text) for text in operation or ()]
    if list_:
        if allowed or denied or operations:
            fail("--list takes resources (and --principal), not principals, hosts or operations")
        listed = [_principal(text, "--principal") for text in principal or ()]
        with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
            _print_listing(admin, resources, pattern_type, listed)
        return
    entries = [AccessControlEntry(p, host, op, AclPermissionType.ALLOW)
               for p in allowed for host in allow_host or [WILDCARD_HOST] for op in operations or [AclOperation.ALL]]
    entries += [AccessControlEntry(p, host, op, AclPermissionType.DENY)
                for p in denied for host in deny_host or [WILDCARD_HOST] for op in operations or [AclOperation.ALL]]
    if producer or consumer:
        if operations:
            fail("--producer and --consumer choose the operations themselves: leave out --operation")
        by_resource = _convenience_acls(producer, idempotent, resources, allowed, denied, allow_host, deny_host)
    else:
        if not resources:
            fail("name a resource: --topic, --group, --cluster, --transactional-id, --delegation-token or "
                 "--user-principal")
        by_resource = {resource: entries for resource in resources}
        if add and not entries:
            fail("--add needs --allow-principal or --deny-principal")
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        if add:
            for (kind, name), resource_entries in by_resource.items():
                pattern = ResourcePattern(kind, name, pattern_type)
                typer.echo(f"Adding ACLs for resource `{_pattern_text(pattern)}`: \n "
                           f"{_entries_text(resource_entries)}\n")
                results = admin.create_acls([AclBinding(pattern, entry) for entry in resource_entries])
                for error in results.values():
                    if error is not None:
                        raise error
        else:
            for (kind, name), resource_entries in by_resource.items():
                acl_filter = AclBindingFilter(kind, name, pattern_type)
                # Kafka's ResourcePatternFilter prints as a ResourcePattern (any pattern type, any and match too).
                filter_text = _pattern_text(ResourcePattern(kind, name, pattern_type))
                question = f"Are you sure you want to delete all ACLs for resource filter `{filter_text}`? (y/n)" \
                    if not resource_entries else \
                    f"Are you sure you want to remove ACLs: \n {_entries_text(resource_entries)}\n " \
                    f"from resource filter `{filter_text}`? (y/n)"
                if not force and not _confirmed(question):
                    continue
                filters = [acl_filter] if not resource_entries else [
                    AclBindingFilter(kind, name, pattern_type, entry.principal, entry.host, entry.operation,
                                     entry.permission_type) for entry in resource_entries]
                for outcome in admin.delete_acls(filters).values():
                    if not isinstance(outcome, list):
                        raise outcome


def _admin(bootstrap_server: str, command_config: str | None):
    from kfk.client import Admin

    return Admin(client_config(bootstrap_server, command_config))


def _pattern_type(text: str | None, add: bool) -> PatternType:
    if text is None:
        return PatternType.LITERAL
    try:
        pattern_type = parse_title(PatternType, text)
    except ValueError:
        pattern_type = PatternType.UNKNOWN
    allowed = (PatternType.LITERAL, PatternType.PREFIXED) if add else \
        (PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH)
    if pattern_type not in allowed:
        fail(f"--resource-pattern-type must be one of {', '.join(p.name.lower() for p in allowed)}"
             f"{' with --add' if add else ''}, not {text!r}")
    return pattern_type


def _principal(text: str, flag: str) -> str:
    try:
        return str(KafkaPrincipal.parse(text))
    except ValueError as error:
        fail(f"{flag}: {error}")


def _operation(text: str) -> AclOperation:
    try:
        operation = parse_title(AclOperation, text)
    except ValueError:
        operation = AclOperation.UNKNOWN
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        fail(f"unknown --operation {text!r}: use one of "
             f"{', '.join(op.title for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY))}")
    return operation


def _convenience_acls(producer: bool, idempotent: bool, resources: list[tuple[ResourceType, str]],
                      allowed: list[str], denied: list[str], allow_hosts: list[str] | None,
                      deny_hosts: list[str] | None) -> dict[tuple[ResourceType, str], list[AccessControlEntry]]:
    """kafka-acls.sh's --producer / --consumer sets, for the principals given."""
    topics = [resource for resource in resources if resource[0] == ResourceType.TOPIC]
    groups = [resource for resource in resources if resource[0] == ResourceType.GROUP]
    transactional_ids = [resource for resource in resources if resource[0] == ResourceType.TRANSACTIONAL_ID]
    if not topics:
        fail(f"--{'producer' if producer else 'consumer'} needs --topic")
    if not producer and not groups:
        fail("--consumer needs --group")
    if not allowed and not denied:
        fail("name the principals with --allow-principal or --deny-principal")

    def entries(operations: list[AclOperation]) -> list[AccessControlEntry]:
        return [AccessControlEntry(p, host, op, AclPermissionType.ALLOW)
                for p in allowed for host in allow_hosts or [WILDCARD_HOST] for op in operations] + \
            [AccessControlEntry(p, host, op, AclPermissionType.DENY)
             for p in denied for host in deny_hosts or [WILDCARD_HOST] for op in operations]

    acls: dict[tuple[ResourceType, str], list[AccessControlEntry]] = {}
    if producer:
        for resource in topics:
            acls[resource] = entries([AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE])
        for resource in transactional_ids:
            acls[resource] = entries([AclOperation.WRITE, AclOperation.DESCRIBE])
        if idempotent:
            acls[(ResourceType.CLUSTER, CLUSTER_NAME)] = entries([AclOperation.IDEMPOTENT_WRITE])
    else:
        for resource in topics:
            acls[resource] = entries([AclOperation.READ, AclOperation.DESCRIBE])
        for resource in groups:
            acls[resource] = entries([AclOperation.READ])
    return acls


def _confirmed(question: str) -> bool:
    typer.echo(question)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def _pattern_text(pattern: ResourcePattern) -> str:
    return f"ResourcePattern(resourceType={pattern.resource_type.name}, name={pattern.name}, " \
           f"patternType={pattern.pattern_type.name})"


def _entry_text(entry: AccessControlEntry) -> str:
    return f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, " \
           f"permissionType={entry.permission_type.name})"


def _entries_text(entries: list[AccessControlEntry]) -> str:
    return "\n".join(f"\t{_entry_text(entry)}" for entry in entries)


def _print_listing(admin, resources: list[tuple[ResourceType, str]], pattern_type: PatternType,
                   principals: list[str]) -> None:
    """The ACLs of the resources (every ACL when none is named), by resource pattern."""
    if resources:
        bindings = [binding for kind, name in resources
                    for binding in admin.describe_acls(AclBindingFilter(kind, name, pattern_type))]
    else:
        bindings = admin.describe_acls(AclBindingFilter())
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        entries = by_pattern.setdefault(binding.pattern, [])
        if binding.entry not in entries:
            entries.append(binding.entry)
    ordered = sorted(by_pattern.items(), key=lambda item: (item[0].resource_type, item[0].name,
                                                           item[0].pattern_type))
    for listed in principals or [None]:
        if listed is not None:
            typer.echo(f"ACLs for principal `{listed}`")
        for pattern, entries in ordered:
            shown = [entry for entry in entries if listed is None or entry.principal == listed]
            if shown:
                typer.echo(f"Current ACLs for resource `{_pattern_text(pattern)}`:\n{_entries_text(shown)}\n")
