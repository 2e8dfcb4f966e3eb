"""`kfk storage format` for a node's config (kafka-storage format): meta.properties in every log dir, the
bootstrap snapshot with the metadata.version and the `--add-scram` credentials, and for a dynamic quorum the initial
voter set.

The metadata log dir is the first log dir (where the embedded backend keeps __cluster_metadata-0). Kafka's rules
about the quorum flags hold: --standalone and --initial-controllers are for controllers of a dynamic quorum
(controller.quorum.bootstrap.servers, never with static controller.quorum.voters), and a controller of a dynamic
quorum must be given one of --standalone, --initial-controllers or --no-initial-controllers.

--add-scram needs metadata.version 3.5-IV2 or later, the first whose records hold SCRAM credentials: below it the
format is refused in Kafka's words, before the arguments are parsed (as Kafka's Formatter does).
"""

from __future__ import annotations

import os
import uuid
from typing import Mapping, Sequence

from kfk.backends.embedded.bootstrap import (
    InitialController,
    parse_initial_controllers,
    write_bootstrap_checkpoint,
    write_initial_voters,
)
from kfk.config import BrokerConfig
from kfk.common.features import (
    FEATURES,
    KRAFT_VERSION_FEATURE_NAME,
    METADATA_VERSION_FEATURE_NAME,
    default_feature_levels,
    dependency_problem,
    metadata_version,
    metadata_version_from_string,
)
from kfk.controller.features import (
    LATEST_METADATA_VERSION,
    MINIMUM_METADATA_VERSION,
    SCRAM_LEVEL,
    kfk_default_feature_levels,
    supported_features,
)
from kfk.errors import InvalidConfigurationError
from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class
from kfk.security.sasl.add_scram import ScramCredentialArgument, parse_add_scram
from kfk.server.network import Listener
from kfk.storage.format import format_log_dirs
from kfk.storage.meta_properties import MetaProperties
from kfk.common.uuids import uuid_from_base64, uuid_to_base64

FeatureLevelRecord = schema_class("FeatureLevelRecord")
UserScramCredentialRecord = schema_class("UserScramCredentialRecord")


def format_storage(config: BrokerConfig, cluster_id: str, now_ms: int, *, standalone: bool = False,
                   initial_controllers: str | None = None, no_initial_controllers: bool = False,
                   release_version: str | None = None, features: Sequence[str] = (), ignore_formatted: bool = False,
                   add_scram: Sequence[str] = ()) -> list[str]:
    """Format the node's log dirs; returns the lines kafka-storage prints (one per dir formatted now). Every
    argument is checked (the --add-scram ones parsed and their passwords salted) before anything is written."""
    levels = feature_levels(release_version, features)
    metadata_version_name = metadata_version(levels[METADATA_VERSION_FEATURE_NAME]).name
    if sum([standalone, initial_controllers is not None, no_initial_controllers]) > 1:
        raise InvalidConfigurationError(
            "give at most one of --standalone, --initial-controllers, --no-initial-controllers")
    if add_scram and levels[METADATA_VERSION_FEATURE_NAME] < SCRAM_LEVEL:
        raise InvalidConfigurationError(
            f"SCRAM is only supported in metadata.version {metadata_version(SCRAM_LEVEL).name} or later.")
    records = bootstrap_records(levels, [parse_add_scram(argument) for argument in add_scram])
    log_dirs = [os.path.abspath(log_dir) for log_dir in config.log_dir_list]
    metadata_dir = log_dirs[0]
    voters = _initial_voters(config, standalone, initial_controllers, no_initial_controllers)
    directory_ids = {}
    own = next((voter for voter in voters if voter.node_id == config.node_id), None)
    if own is not None:
        directory_ids[metadata_dir] = uuid_to_base64(own.directory_id)
    formatted = format_log_dirs(log_dirs, cluster_id, config.node_id, ignore_formatted, directory_ids)
    if not formatted:
        return ["All of the log directories are already formatted."]
    for log_dir in formatted:
        write_bootstrap_checkpoint(log_dir, records, now_ms)
    if metadata_dir in formatted and voters:
        write_initial_voters(metadata_dir, voters, now_ms)
    lines = [f"Formatting data directory {log_dir} with metadata.version {metadata_version_name}."
             for log_dir in formatted if log_dir != metadata_dir]
    if metadata_dir in formatted:
        kind = "dynamic metadata voter directory" if voters else "metadata directory"
        lines.append(f"Formatting {kind} {metadata_dir} with metadata.version {metadata_version_name}.")
    return lines


def feature_levels(release_version: str | None, features: Sequence[str]) -> dict[str, int]:
    """The feature levels to bootstrap with, metadata.version first, as Kafka's storage tool computes them: the
    defaults of --release-version (or of --feature metadata.version=LEVEL), overridden by the other --feature
    levels, each checked against its dependencies. kfk refuses in one line what its nodes do not serve, naming its
    range. Without a release kfk takes its own defaults (controller/features.py: its latest metadata.version and
    transaction.version 2; Kafka's tool would format its latest release, 4.4-IV2, which kfk does not serve)."""
    asked: dict[str, int] = {}
    for feature in features:
        name, equals, text = feature.partition("=")
        if not equals:
            raise InvalidConfigurationError(f"Can't parse feature=level string {feature}: equals sign not found.")
        name = name.strip()
        if name != METADATA_VERSION_FEATURE_NAME and name not in FEATURES:
            raise InvalidConfigurationError(
                f"Unsupported feature: {name}. Supported features are: {', '.join(sorted(FEATURES))}")
        if name == METADATA_VERSION_FEATURE_NAME and release_version is not None:
            raise InvalidConfigurationError(
                "Use --release-version instead of --feature metadata.version=X to avoid ambiguity.")
        try:
            asked[name] = int(text.strip())
        except ValueError:
            raise InvalidConfigurationError(f"Can't parse feature=level string {feature}: unable to parse "
                                            f"{text.strip()} as a short.") from None
    if METADATA_VERSION_FEATURE_NAME in asked:
        levels = default_feature_levels(_metadata_version_of_level(asked.pop(METADATA_VERSION_FEATURE_NAME)))
    elif release_version is not None:
        levels = default_feature_levels(_metadata_version_of_release(release_version))
    else:
        levels = kfk_default_feature_levels()
    for name, level in asked.items():
        if FEATURES[name].level(level) is None:
            raise InvalidConfigurationError(f"No feature:{name} with feature level {level}")
        levels[name] = level
    supported = supported_features()
    for name, level in levels.items():
        if name == METADATA_VERSION_FEATURE_NAME or level == 0:
            continue
        problem = dependency_problem(name, level, levels)
        if problem is not None:
            raise InvalidConfigurationError(problem)
        low, high = supported.get(name, (0, 0))
        if name != KRAFT_VERSION_FEATURE_NAME and not low <= level <= high:
            raise InvalidConfigurationError(
                f"{name}={level} is not a level kfk serves: " + (f"its nodes support {name} {low} to {high}"
                                                                 if high else f"its nodes do not support {name} yet"))
    return levels


def _metadata_version_of_level(level: int) -> int:
    if metadata_version(level) is None or level > LATEST_METADATA_VERSION.level:
        raise InvalidConfigurationError(
            f"No MetadataVersion with feature level {level}. Valid feature levels are from "
            f"{MINIMUM_METADATA_VERSION.level} to {LATEST_METADATA_VERSION.level} ({_kfk_range()}).")
    return level


def _metadata_version_of_release(release_version: str) -> int:
    version = metadata_version_from_string(release_version)
    if version is None or version.level > LATEST_METADATA_VERSION.level:
        raise InvalidConfigurationError(
            f"Version {release_version} is not a valid version. The minimum version is "
            f"{MINIMUM_METADATA_VERSION.name} and the maximum version is {LATEST_METADATA_VERSION.name} "
            f"({_kfk_range()})")
    return version.level


def _kfk_range() -> str:
    if MINIMUM_METADATA_VERSION == LATEST_METADATA_VERSION:
        return f"{LATEST_METADATA_VERSION.name}, the one metadata.version kfk's controller writes"
    return f"{MINIMUM_METADATA_VERSION.name} to {LATEST_METADATA_VERSION.name}, the metadata.versions kfk's " \
           "controller writes"


def bootstrap_records(levels: Mapping[str, int], credentials: Sequence[ScramCredentialArgument]) -> list[Message]:
    """What kafka-storage format bootstraps a cluster with: the finalized feature levels, metadata.version first
    (kraft.version is the quorum's, set by --standalone / --initial-controllers, never a FeatureLevelRecord), then the
    --add-scram credentials in the order given."""
    return [*(FeatureLevelRecord(name=name, feature_level=level) for name, level in levels.items()
              if name == METADATA_VERSION_FEATURE_NAME or (level > 0 and name != KRAFT_VERSION_FEATURE_NAME)),
            *(UserScramCredentialRecord(name=argument.name, mechanism=argument.mechanism,
                                        salt=argument.credential.salt, stored_key=argument.credential.stored_key,
                                        server_key=argument.credential.server_key,
                                        iterations=argument.credential.iterations) for argument in credentials)]


def _initial_voters(config: BrokerConfig, standalone: bool, initial_controllers: str | None,
                    no_initial_controllers: bool) -> list[InitialController]:
    is_controller = "controller" in config.process_roles
    if standalone or initial_controllers is not None:
        if not is_controller:
            raise InvalidConfigurationError(
                "--standalone and --initial-controllers format a controller: process.roles must include controller")
        if config.controller_quorum_voters:
            raise InvalidConfigurationError(
                "--standalone and --initial-controllers start a dynamic quorum: controller.quorum.voters must not "
                "be set (set controller.quorum.bootstrap.servers instead)")
        if not config.controller_listener_names:
            raise InvalidConfigurationError("controller.listener.names must name the controller listener")
    elif is_controller and config.controller_quorum_bootstrap_servers and not config.controller_quorum_voters \
            and not no_initial_controllers:
        raise InvalidConfigurationError(
            "Because controller.quorum.voters is not set on this controller, you must specify one of the "
            "following: --standalone, --initial-controllers, or --no-initial-controllers.")
    if initial_controllers is not None:
        return parse_initial_controllers(initial_controllers, config.controller_listener_names[0])
    if not standalone:
        return []
    return [InitialController(config.node_id, uuid.uuid4(), controller_endpoints(config, "--standalone"))]


def controller_endpoints(config: BrokerConfig, purpose: str) -> tuple[tuple[str, str, int], ...]:
    """A controller's endpoints as a voter: its controller listeners (name, host, port), advertised ones first
    (an empty host is localhost). `purpose` names what needs them, for the error when there are none."""
    names = [name.upper() for name in config.controller_listener_names]
    for texts in (config.advertised_listeners or [], config.listeners):
        listeners = [Listener.parse(text) for text in texts]
        endpoints = tuple((listener.name, listener.host or "localhost", listener.port)
                          for name in names for listener in listeners if listener.name == name)
        if endpoints:
            if any(port == 0 for _, _, port in endpoints):
                raise InvalidConfigurationError(f"{purpose} needs the controller listener's port: it is 0")
            return endpoints
    raise InvalidConfigurationError(
        f"listeners has no controller listener ({', '.join(config.controller_listener_names)}) for {purpose}")


def controller_voter(config: BrokerConfig) -> tuple[int, uuid.UUID, tuple[tuple[str, str, int], ...]]:
    """What `kfk metadata-quorum add-controller` asks the quorum to add, from the controller's own config: its
    node id, the directory id `kfk storage format` gave its metadata log dir, and its controller endpoints."""
    if "controller" not in config.process_roles:
        raise InvalidConfigurationError("add-controller takes a controller's properties: process.roles must include "
                                        "controller")
    metadata_dir = os.path.abspath(config.log_dir_list[0])
    meta = MetaProperties.read(metadata_dir)
    if meta is None or not meta.directory_id:
        raise InvalidConfigurationError(f"The metadata directory {metadata_dir} is not formatted: run `kfk storage "
                                        "format --no-initial-controllers` for this controller first")
    return config.node_id, uuid_from_base64(meta.directory_id), controller_endpoints(config, "add-controller")


def parse_directory_id(text: str) -> uuid.UUID:
    """A directory id as Kafka's tools print and take it (a Uuid in URL-safe base64)."""
    try:
        return uuid_from_base64(text)
    except ValueError:
        raise InvalidConfigurationError(f"{text!r} is not a directory id (22 characters of base64)") from None
