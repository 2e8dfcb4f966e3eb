"""`kfk features describe | upgrade | downgrade | disable | version-mapping | feature-dependencies`:
kafka-features.sh, with its flags, lines and exit codes, so scripts written for it read kfk's output.

describe lists every feature the node asked supports, by name, with its supported range, the cluster's finalized
level (0 when not finalized) and the finalized levels' epoch (metadata.version's levels by name, e.g. 3.3-IV3).
upgrade / downgrade take --feature NAME=LEVEL (repeatable), --metadata VERSION (deprecated in Kafka 4: it says so) or
--release-version VERSION (metadata.version and every feature at that release's default, the ones above 0), and
--dry-run (UpdateFeatures validate_only); downgrade --unsafe asks for an unsafe downgrade; disable --feature NAME sets
a feature to 0. Each feature's outcome is one line ("... was upgraded to N." / "Could not upgrade ... . <the
controller's reason>"), sorted by name; failures end with "N out of M operation(s) failed." on stderr and exit 1.
version-mapping prints the levels a release finalizes, feature-dependencies what a feature level needs: both offline,
from Kafka 4.4's tables (kfk/common/features.py). The connection options may come before the subcommand, where
kafka-features.sh takes them.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kfk.commands.client_options import (
    BootstrapController,
    BrokersOrControllersBootstrapServer,
    DEFAULT_BOOTSTRAP_SERVER,
    CommandConfig,
    ConnectionOptionsFirst,
    Debug,
    client_config,
    client_errors,
)
from kfk.commands.errors import fail
from kfk.common.features import (
    FEATURES,
    KAFKA_LATEST_PRODUCTION,
    METADATA_VERSION_FEATURE_NAME,
    METADATA_VERSIONS,
    default_feature_levels,
    metadata_version,
    metadata_version_from_string,
)

app = typer.Typer(help="Describe and change the cluster's finalized feature versions (kafka-features.sh).",
                  no_args_is_help=True, cls=ConnectionOptionsFirst)

BootstrapServer = BrokersOrControllersBootstrapServer
FeatureOption = Annotated[Optional[list[str]], typer.Option(
    "--feature", help="A feature level to set, NAME=LEVEL (repeatable), e.g. transaction.version=2.")]
Metadata = Annotated[Optional[str], typer.Option(
    "--metadata", help="DEPRECATED: the metadata.version to set, e.g. 4.4-IV2 (use --feature or --release-version).")]
ReleaseVersion = Annotated[Optional[str], typer.Option(
    "--release-version", help="Set metadata.version and every feature to this release's levels, e.g. 4.4 (see "
                              "version-mapping).")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Validate the change, but do not make it.")]
Unsafe = Annotated[bool, typer.Option("--unsafe", help="Downgrade even if it may irreversibly destroy metadata.")]

#: Kafka's FeatureUpdate.UpgradeType codes.
_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE = 1, 2, 3


def _servers(bootstrap_server: str | None, bootstrap_controller: str | None) -> str:
    if bootstrap_server and bootstrap_controller:
        fail("give only one of --bootstrap-server or --bootstrap-controller")
    return bootstrap_controller or bootstrap_server or DEFAULT_BOOTSTRAP_SERVER


def _level_text(name: str, level: int) -> str:
    """metadata.version levels by Kafka's name, every other level as a number (FeatureCommand.levelToString)."""
    if name == METADATA_VERSION_FEATURE_NAME:
        version = metadata_version(level)
        return version.name if version is not None else f"UNKNOWN {level}"
    return str(level)


def _unknown_metadata_version(text: str) -> str:
    return (f"Unknown metadata.version {text}. Supported metadata.version are "
            + ", ".join(version.name for version in METADATA_VERSIONS))


@app.command()
def describe(
    bootstrap_server: BootstrapServer = None,
    bootstrap_controller: BootstrapController = None,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Describe the features the node supports and the cluster's finalized levels."""
    with client_errors(debug):
        from kfk.client import Admin

        with Admin(client_config(_servers(bootstrap_server, bootstrap_controller), command_config)) as admin:
            metadata = admin.describe_features()
    epoch = "-" if metadata.finalized_features_epoch is None else str(metadata.finalized_features_epoch)
    for name in sorted(metadata.supported_features):
        low, high = metadata.supported_features[name]
        finalized = metadata.finalized_features.get(name, 0)
        # Kafka 4.4's tool pads its columns (4.0's separated them with tabs).
        typer.echo(f"{'Feature: ' + name:<50} {'SupportedMinVersion: ' + _level_text(name, low):<37} "
                   f"{'SupportedMaxVersion: ' + _level_text(name, high):<37} "
                   f"{'FinalizedVersionLevel: ' + _level_text(name, finalized):<39} Epoch: {epoch}")


def _parse_levels(features: list[str] | None) -> dict[str, int]:
    levels: dict[str, int] = {}
    for feature in features or []:
        name, equals, text = feature.partition("=")
        if not equals:
            fail(f"Can't parse feature=level string {feature}: equals sign not found.")
        name, text = name.strip(), text.strip()
        try:
            level = int(text)
            if not -32768 <= level <= 32767:
                raise ValueError(text)
        except ValueError:
            fail(f"Can't parse feature=level string {feature}: unable to parse {text} as a short.")
        if name in levels:
            fail(f"Feature {name} was specified more than once.")
        levels[name] = level
    return levels


def _requested_levels(metadata: str | None, release_version: str | None, features: list[str] | None) -> dict[str, int]:
    """The levels upgrade / downgrade asks for, as kafka-features.sh computes them."""
    if metadata is not None:
        typer.echo(" `metadata` flag is deprecated and may be removed in a future release.")
    if release_version is not None:
        if metadata is not None or features:
            fail("Can not specify `release-version` with other feature flags.")
        version = metadata_version_from_string(release_version)
        if version is None:
            fail(_unknown_metadata_version(release_version))
        return {name: level for name, level in default_feature_levels(version.level, kraft_version=True).items()
                if level > 0}
    levels: dict[str, int] = {}
    if metadata is not None:
        version = metadata_version_from_string(metadata)
        if version is None:
            fail(_unknown_metadata_version(metadata))
        levels[METADATA_VERSION_FEATURE_NAME] = version.level
    for name, level in _parse_levels(features).items():
        if name in levels:
            fail(f"Feature {name} was specified more than once.")
        levels[name] = level
    return levels


def _update(operation: str, levels: dict[str, int], upgrade_type: int, dry_run: bool, servers: str,
            command_config: str | None, debug: bool) -> None:
    if not levels:
        fail(f"You must specify at least one feature to {operation}")
    with client_errors(debug):
        from kfk.client import Admin
        from kfk.client.structs import FeatureUpdate, UpgradeType

        with Admin(client_config(servers, command_config)) as admin:
            outcomes = admin.update_features(
                {name: FeatureUpdate(level, UpgradeType(upgrade_type)) for name, level in levels.items()},
                validate_only=dry_run)
    failures = 0
    for name in sorted(outcomes):
        error = outcomes[name]
        if error is not None:
            what = f"disable {name}" if operation == "disable" else f"{operation} {name} to {levels[name]}"
            typer.echo(f"{'Can not' if dry_run else 'Could not'} {what}. {error.message}")
            failures += 1
        else:
            done = "disabled." if operation == "disable" else f"{operation}d to {levels[name]}."
            typer.echo(f"{name} {'can be' if dry_run else 'was'} {done}")
    if failures:
        fail(f"{failures} out of {len(levels)} operation(s) failed.")


@app.command()
def upgrade(
    feature: FeatureOption = None,
    metadata: Metadata = None,
    release_version: ReleaseVersion = None,
    dry_run: DryRun = False,
    bootstrap_server: BootstrapServer = None,
    bootstrap_controller: BootstrapController = None,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Upgrade one or more feature levels."""
    servers = _servers(bootstrap_server, bootstrap_controller)
    _update("upgrade", _requested_levels(metadata, release_version, feature), _UPGRADE, dry_run, servers,
            command_config, debug)


@app.command()
def downgrade(
    feature: FeatureOption = None,
    metadata: Metadata = None,
    release_version: ReleaseVersion = None,
    unsafe: Unsafe = False,
    dry_run: DryRun = False,
    bootstrap_server: BootstrapServer = None,
    bootstrap_controller: BootstrapController = None,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Downgrade one or more feature levels."""
    servers = _servers(bootstrap_server, bootstrap_controller)
    _update("downgrade", _requested_levels(metadata, release_version, feature),
            _UNSAFE_DOWNGRADE if unsafe else _SAFE_DOWNGRADE, dry_run, servers, command_config, debug)


@app.command()
def disable(
    feature: Annotated[Optional[list[str]], typer.Option(
        "--feature", help="A feature to disable (set to level 0; repeatable).")] = None,
    unsafe: Unsafe = False,
    dry_run: DryRun = False,
    bootstrap_server: BootstrapServer = None,
    bootstrap_controller: BootstrapController = None,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Disable one or more features (the same as downgrading them to level 0)."""
    levels: dict[str, int] = {}
    for name in feature or []:
        if name in levels:
            fail(f"Feature {name} was specified more than once.")
        levels[name] = 0
    _update("disable", levels, _UNSAFE_DOWNGRADE if unsafe else _SAFE_DOWNGRADE, dry_run,
            _servers(bootstrap_server, bootstrap_controller), command_config, debug)


@app.command("version-mapping")
def version_mapping(
    release_version: Annotated[Optional[str], typer.Option(
        "--release-version", help=f"The release to map (default {KAFKA_LATEST_PRODUCTION.name}).")] = None,
    bootstrap_server: BootstrapServer = None,
    bootstrap_controller: BootstrapController = None,
    command_config: CommandConfig = None,
) -> None:
    """Print the feature levels a release finalizes (nothing is asked of the cluster)."""
    version = KAFKA_LATEST_PRODUCTION if release_version is None else metadata_version_from_string(release_version)
    if version is None:
        fail(_unknown_metadata_version(release_version))
    typer.echo(f"metadata.version={version.level} ({version.name})")
    for name, level in default_feature_levels(version.level, kraft_version=True).items():
        if name != METADATA_VERSION_FEATURE_NAME:
            typer.echo(f"{name}={level}")


@app.command("feature-dependencies")
def feature_dependencies(
    feature: FeatureOption = None,
    bootstrap_server: BootstrapServer = None,
    bootstrap_controller: BootstrapController = None,
    command_config: CommandConfig = None,
) -> None:
    """Print what each feature level needs (nothing is asked of the cluster)."""
    for name, level in _parse_levels(feature).items():
        if name == METADATA_VERSION_FEATURE_NAME:
            version = metadata_version(level)
            if version is None:
                fail(f"No MetadataVersion with feature level {level}")
            typer.echo(f"{name}={level} ({version.name}) has no dependencies.")
            continue
        if name not in FEATURES:
            fail(f"Unknown feature: {name}")
        entry = FEATURES[name].level(level)
        if entry is None:
            fail(f"No feature:{name} with feature level {level}")
        if not entry.dependencies:
            typer.echo(f"{name}={level} has no dependencies.")
            continue
        typer.echo(f"{name}={level} requires:")
        for dependency, needed in entry.dependencies.items():
            shown = metadata_version(needed).name if dependency == METADATA_VERSION_FEATURE_NAME else None
            typer.echo(f"    {dependency}={needed}" + (f" ({shown})" if shown else ""))
