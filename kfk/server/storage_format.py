"""`kfk storage format` for a node's config (kafka-storage format): meta.properties in every log dir, the
bootstrap snapshot with the metadata.version and the `--add-scram` credentials, and for a dynamic quorum the initial
voter set.

The metadata log dir is the first log dir (where the embedded backend keeps __cluster_metadata-0). Kafka's rules
about the quorum flags hold: --standalone and --initial-controllers are for controllers of a dynamic quorum
(controller.quorum.bootstrap.servers, never with static controller.quorum.voters), and a controller of a dynamic
quorum must be given one of --standalone, --initial-controllers or --no-initial-controllers.

One difference: Kafka refuses --add-scram below metadata.version 3.5-IV2; kfk's controller keeps SCRAM credentials
at the one level it runs, 3.3-IV3 (as it does for AlterUserScramCredentials), so kfk formats them there. Apache
Kafka 4.0 cannot hold them at that level (its controller stops: "Metadata has been lost because the following could
not be represented in metadata.version 3.3-IV3: ScramImage"), so a node kfk formatted with --add-scram starts kfk,
not Apache Kafka, until kfk's metadata.version (controller/features.py) reaches 3.5-IV2.
"""

from __future__ import annotations

import os
import uuid
from typing import Sequence

from kfk.backends.embedded.bootstrap import (
    InitialController,
    parse_initial_controllers,
    write_bootstrap_checkpoint,
    write_initial_voters,
)
from kfk.config import BrokerConfig
from kfk.controller.features import METADATA_VERSION_FEATURE_NAME, METADATA_VERSION_LEVEL, METADATA_VERSION_NAME
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
#: The --release-version values kfk accepts: the metadata.version its controller writes, by release or by name.
RELEASE_VERSIONS = {"3.3": METADATA_VERSION_LEVEL, METADATA_VERSION_NAME: METADATA_VERSION_LEVEL}


def format_storage(config: BrokerConfig, cluster_id: str, now_ms: int, *, standalone: bool = False,
                   initial_controllers: str | None = None, no_initial_controllers: bool = False,
                   release_version: str | None = None, features: Sequence[str] = (), ignore_formatted: bool = False,
                   add_scram: Sequence[str] = ()) -> list[str]:
    """Format the node's log dirs; returns the lines kafka-storage prints (one per dir formatted now). Every
    argument is checked (the --add-scram ones parsed and their passwords salted) before anything is written."""
    metadata_version_level = _metadata_version_level(release_version, features)
    if sum([standalone, initial_controllers is not None, no_initial_controllers]) > 1:
        raise InvalidConfigurationError(
            "give at most one of --standalone, --initial-controllers, --no-initial-controllers")
    records = bootstrap_records(metadata_version_level, [parse_add_scram(argument) for argument in add_scram])
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
    lines = [f"Formatting data directory {log_dir} with metadata.version {METADATA_VERSION_NAME}."
             for log_dir in formatted if log_dir != metadata_dir]
    if metadata_dir in formatted:
        kind = "dynamic metadata voter directory" if voters else "metadata directory"
        lines.append(f"Formatting {kind} {metadata_dir} with metadata.version {METADATA_VERSION_NAME}.")
    return lines


def _metadata_version_level(release_version: str | None, features: Sequence[str]) -> int:
    """The metadata.version --release-version or --feature metadata.version=LEVEL asks for, refused as Kafka's tool
    refuses a level it does not know when kfk's controller cannot serve it: kfk writes one level, so the default is
    that level (Kafka's tool defaults to its newest, 4.0-IV3) and every other level is out of kfk's range."""
    level = RELEASE_VERSIONS.get(release_version or METADATA_VERSION_NAME)
    if level is None:
        raise InvalidConfigurationError(
            f"Version {release_version} is not a valid version. The minimum version is {METADATA_VERSION_NAME} and "
            f"the maximum version is {METADATA_VERSION_NAME} (the one metadata.version kfk's controller writes)")
    for feature in features:
        name, equals, text = feature.partition("=")
        if not equals:
            raise InvalidConfigurationError(f"Can't parse feature=level string {feature}: equals sign not found.")
        if name != METADATA_VERSION_FEATURE_NAME:
            raise InvalidConfigurationError(
                f"Unsupported feature: {name}. kfk formats {METADATA_VERSION_FEATURE_NAME} only (its controller "
                "finalizes the other features itself)")
        if release_version is not None:
            raise InvalidConfigurationError(
                "Use --release-version instead of --feature metadata.version=X to avoid ambiguity.")
        try:
            level = int(text.strip())
        except ValueError:
            raise InvalidConfigurationError(f"Can't parse feature=level string {feature}: unable to parse "
                                            f"{text.strip()} as a short.") from None
        if level != METADATA_VERSION_LEVEL:
            raise InvalidConfigurationError(
                f"No MetadataVersion with feature level {level}. Valid feature levels are from "
                f"{METADATA_VERSION_LEVEL} to {METADATA_VERSION_LEVEL} ({METADATA_VERSION_NAME}, the one "
                "metadata.version kfk's controller writes).")
    return level


def bootstrap_records(metadata_version_level: int, credentials: Sequence[ScramCredentialArgument]) -> list[Message]:
    """What kafka-storage format bootstraps a cluster with: the metadata.version, then the --add-scram credentials
    in the order given."""
    return [FeatureLevelRecord(name=METADATA_VERSION_FEATURE_NAME, feature_level=metadata_version_level),
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
