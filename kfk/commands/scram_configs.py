"""`kfk configs --entity-type users`: SCRAM credentials, as kafka-configs.sh manages them.

`--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'` sets a credential (iterations default
to 4096; the password is salted by the admin client, never sent), `--delete-config SCRAM-SHA-512` removes one, both
through AlterUserScramCredentials; `--describe` prints each user's mechanisms and iterations from
DescribeUserScramCredentials in kafka-configs.sh's words: `SCRAM credential configs for user-principal 'alice' are
SCRAM-SHA-256=iterations=8192`. A user's other keys are client quotas (kfk/commands/quota_configs.py): `kfk
configs` hands this module the SCRAM keys alone.
"""

from __future__ import annotations

import typer

from kfk.commands.client_options import client_config, client_errors, print_json
from kfk.commands.errors import fail

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _upsertion(user: str, mechanism: str, value: str):
    from kfk.client.structs import UserScramCredentialUpsertion
    from kfk.security.sasl.scram import DEFAULT_ITERATIONS

    settings = dict(item.partition("=")[::2] for item in value.split(",") if item.strip())
    unknown = sorted(set(settings) - {"iterations", "password"})
    if unknown or "password" not in settings:
        fail(f"{mechanism} takes [iterations=N,password=...] (password required), not [{value}]")
    try:
        iterations = int(settings.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        fail(f"{mechanism}: iterations must be a number, not {settings['iterations']!r}")
    return UserScramCredentialUpsertion(user, mechanism, iterations, settings["password"])


def scram_configs(user: str | None, alter: bool, additions: dict[str, str], deletions: list[str],
                  bootstrap_server: str, command_config: str | None, json_output: bool, debug: bool) -> None:
    """--alter or --describe the SCRAM credentials of `user` (--describe without a user: every user's)."""
    if alter and not user:
        fail("--alter needs the user: --entity-name")
    with client_errors(debug):
        from kfk.client import Admin
        from kfk.client.structs import UserScramCredentialDeletion

        with Admin(client_config(bootstrap_server, command_config)) as admin:
            if alter:
                assert user is not None
                alterations = [_upsertion(user, mechanism, value) for mechanism, value in additions.items()]
                alterations += [UserScramCredentialDeletion(user, mechanism) for mechanism in deletions]
                error = admin.alter_user_scram_credentials(alterations)[user]
                if error is not None:
                    raise error
                typer.echo(f"Completed updating config for user {user}.")
                return
            described = admin.describe_user_scram_credentials([user] if user else None)
    credentials = {name: infos for name, infos in described.items() if isinstance(infos, list)}
    if json_output:
        print_json({name: [{"mechanism": info.mechanism, "iterations": info.iterations} for info in infos]
                    for name, infos in credentials.items()})
        return
    for name, infos in sorted(credentials.items()):
        listed = ", ".join(f"{info.mechanism}=iterations={info.iterations}" for info in infos)
        typer.echo(f"SCRAM credential configs for user-principal '{name}' are {listed}")
