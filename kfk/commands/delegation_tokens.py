"""`kfk delegation-tokens --create|--renew|--expire|--describe`: kafka-delegation-tokens.sh, with its flags and its
output lines (so scripts that read Kafka's tool read this one).

Tokens are managed over an authenticated connection only (SASL, or TLS with a client certificate), so --command-config
is required, as it is by Kafka's tool. A client then logs in with a token over SASL/SCRAM: user name the token id,
password the HMAC this tool prints, and tokenauth="true" in its JAAS config.
"""

from __future__ import annotations

import base64
import binascii
import datetime
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

app = typer.Typer()


def _principals(texts: list[str] | None, flag: str) -> list:
    from kfk.security.principal import KafkaPrincipal

    principals = []
    for text in texts or ():
        try:
            principals.append(KafkaPrincipal.parse(text.strip()))
        except ValueError:
            fail(f"{flag} {text!r} is not a principal: give it as principalType:name, e.g. User:alice")
    return principals


def _java_list(principals) -> str:
    """A list as Java prints one: [User:a, User:b]."""
    return "[" + ", ".join(str(principal) for principal in principals) + "]"


def _date(epoch_ms: int) -> str:
    """Kafka's tool prints times as yyyy-MM-dd'T'HH:mm in the local time zone."""
    return datetime.datetime.fromtimestamp(epoch_ms / 1000).strftime("%Y-%m-%dT%H:%M")


def _print_tokens(tokens) -> None:
    columns = "{:<15} {:<30} {:<15} {:<15} {:<25} {:<15} {:<15} {:<15}"
    lines = ["", columns.format("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE",
                                "MAXDATE")]
    for token in tokens:
        lines += ["", columns.format(token.token_id, base64.b64encode(token.hmac).decode(), str(token.owner),
                                     str(token.token_requester), _java_list(token.renewers),
                                     _date(token.issue_timestamp_ms), _date(token.expiry_timestamp_ms),
                                     _date(token.max_timestamp_ms))]
    typer.echo("\n".join(lines))


def _hmac(text: str | None) -> bytes:
    try:
        return base64.b64decode(text or "", validate=True)
    except binascii.Error:
        fail(f"--hmac {text!r} is not base64: give the HMAC --create or --describe printed")


@app.command("delegation-tokens")
def delegation_tokens(
    create: Annotated[bool, typer.Option(
        "--create", help="Create a new delegation token (--renewer-principal names who may renew it).")] = False,
    renew: Annotated[bool, typer.Option(
        "--renew", help="Renew a delegation token (--hmac, --renew-time-period).")] = False,
    expire: Annotated[bool, typer.Option(
        "--expire", help="Expire a delegation token (--hmac, --expiry-time-period).")] = False,
    describe: Annotated[bool, typer.Option(
        "--describe", help="Describe the delegation tokens of --owner-principal, else those this user owns or may "
                           "describe.")] = False,
    owner_principal: Annotated[Optional[list[str]], typer.Option(
        "--owner-principal", metavar="PRINCIPAL",
        help="principalType:name: with --create, the token's owner (CreateTokens on that user needed); with "
             "--describe, whose tokens (repeatable).")] = None,
    renewer_principal: Annotated[Optional[list[str]], typer.Option(
        "--renewer-principal", metavar="PRINCIPAL",
        help="principalType:name that may renew the new token (repeatable).")] = None,
    max_life_time_period: Annotated[Optional[int], typer.Option(
        "--max-life-time-period", metavar="MS",
        help="The token's maximum lifetime in ms; -1: the broker's delegation.token.max.lifetime.ms.")] = None,
    renew_time_period: Annotated[Optional[int], typer.Option(
        "--renew-time-period", metavar="MS",
        help="How long a renewal extends the token, in ms; -1: the broker's delegation.token.expiry.time.ms.")] = None,
    expiry_time_period: Annotated[Optional[int], typer.Option(
        "--expiry-time-period", metavar="MS",
        help="Expire the token this many ms from now; -1: at once.")] = None,
    hmac: Annotated[Optional[str], typer.Option(
        "--hmac", metavar="HMAC", help="The token's HMAC (base64), as --create printed it.")] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Create, renew, expire or describe delegation tokens (kafka-delegation-tokens.sh)."""
    if create + renew + expire + describe != 1:
        fail("Command must include exactly one action: --create, --renew, --expire or --describe")
    if not command_config:
        fail("--command-config is required: token operations need an authenticated (SASL or TLS client "
             "certificate) connection, whose settings that properties file gives")
    given = {"--owner-principal": owner_principal, "--renewer-principal": renewer_principal,
             "--max-life-time-period": max_life_time_period, "--renew-time-period": renew_time_period,
             "--expiry-time-period": expiry_time_period, "--hmac": hmac}
    action = "--create" if create else "--renew" if renew else "--expire" if expire else "--describe"
    # Kafka's tool: what each action needs, and what it refuses.
    required = {"--create": ["--max-life-time-period"], "--renew": ["--hmac", "--renew-time-period"],
                "--expire": ["--hmac", "--expiry-time-period"], "--describe": []}
    invalid = {"--create": ["--hmac", "--renew-time-period", "--expiry-time-period"],
               "--renew": ["--renewer-principal", "--max-life-time-period", "--expiry-time-period",
                           "--owner-principal"],
               "--expire": ["--renewer-principal", "--max-life-time-period", "--renew-time-period",
                            "--owner-principal"],
               "--describe": ["--renewer-principal", "--renew-time-period", "--max-life-time-period", "--hmac",
                              "--expiry-time-period"]}
    for flag in required[action]:
        if given[flag] is None:
            fail(f"{action} needs {flag}")
    for flag in invalid[action]:
        if given[flag] is not None:
            fail(f"{flag} cannot be used with {action}")
    owners = _principals(owner_principal, "--owner-principal")
    renewers = _principals(renewer_principal, "--renewer-principal")
    from kfk.client import Admin

    with client_errors(debug), Admin(client_config(bootstrap_server, command_config)) as admin:
        if create:
            typer.echo(f"Calling create token operation with renewers :{_java_list(renewers)} , max-life-time-period "
                       f":{max_life_time_period}")
            token = admin.create_delegation_token(renewers=renewers, owner=owners[0] if owners else None,
                                                  max_lifetime_ms=max_life_time_period)
            typer.echo(f"Created delegation token with tokenId : {token.token_id}")
            _print_tokens([token])
        elif renew or expire:
            verb, period = ("renew", renew_time_period) if renew else ("expire", expiry_time_period)
            typer.echo(f"Calling {verb} token operation with hmac :{hmac} , {verb}-time-period :{period}")
            if renew:
                expiry_ms = admin.renew_delegation_token(_hmac(hmac), renew_time_period_ms=renew_time_period)
            else:
                expiry_ms = admin.expire_delegation_token(_hmac(hmac), expiry_time_period_ms=expiry_time_period)
            typer.echo(f"Completed {verb} operation. New expiry date : {_date(expiry_ms)}", nl=False)
        else:
            typer.echo(f"Calling describe token operation for owners: {_java_list(owners)}" if owners
                       else "Calling describe token operation for current user.")
            tokens = admin.describe_delegation_token(owners)
            typer.echo(f"Total number of tokens : {len(tokens)}", nl=False)
            _print_tokens(tokens)
