"""SCRAM credentials in the metadata (Kafka's ScramControlManager): AlterUserScramCredentials becomes
UserScramCredentialRecord / RemoveUserScramCredentialRecord; DescribeUserScramCredentials reads the image.

The client sends a salted password (never the password), from which the controller derives StoredKey and ServerKey;
the record holds those. Kafka's checks, with its error codes and messages: an unknown mechanism
(UNSUPPORTED_SASL_MECHANISM), an empty user name or iterations outside 4096-16384 (UNACCEPTABLE_CREDENTIAL), a user
and mechanism altered twice in one request (DUPLICATE_RESOURCE), a deletion of a credential that does not exist
(RESOURCE_NOT_FOUND). Each user gets one result; a user with any failure changes nothing.
"""

from __future__ import annotations

from collections import Counter

from kfk.controller.result import ApiError, ControllerResult
from kfk.errors import ErrorCode
from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message
from kfk.protocol.messages.alter_user_scram_credentials import (AlterUserScramCredentialsRequest,
                                                                 AlterUserScramCredentialsResponse)
from kfk.protocol.messages.describe_user_scram_credentials import (DescribeUserScramCredentialsRequest,
                                                                    DescribeUserScramCredentialsResponse)
from kfk.protocol.metadata_records import schema_class
from kfk.security.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism, credential_from_salted_password

UserScramCredentialRecord = schema_class("UserScramCredentialRecord")
RemoveUserScramCredentialRecord = schema_class("RemoveUserScramCredentialRecord")

_OK = ApiError(ErrorCode.NONE)
_UNSUPPORTED = ApiError(ErrorCode.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM")


def _check_mechanism(mechanism: int) -> ApiError:
    if mechanism not in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        return ApiError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism.")
    return _OK


def alter_user_scram_credentials(image: MetadataImage, request: AlterUserScramCredentialsRequest,
                                 supported: bool = True) -> ControllerResult[AlterUserScramCredentialsResponse]:
    """`supported`: whether the metadata.version holds SCRAM credentials (3.5-IV2 on, in KRaft); every alteration
    past the request's own checks is refused otherwise, in Kafka's words."""
    users = dict.fromkeys(item.name for item in [*request.deletions, *request.upsertions])
    pairs = Counter((item.name, item.mechanism) for item in [*request.deletions, *request.upsertions])
    errors: dict[str, ApiError] = {}
    records: dict[str, list[Message]] = {}

    def fail(user: str, error: ApiError) -> None:
        errors.setdefault(user, error)

    for deletion in request.deletions:
        if not deletion.name:
            fail(deletion.name, ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"))
        elif pairs[(deletion.name, deletion.mechanism)] > 1:
            fail(deletion.name, ApiError(ErrorCode.DUPLICATE_RESOURCE,
                                         "A user credential cannot be altered twice in the same request"))
        elif not supported:
            fail(deletion.name, _UNSUPPORTED)
        elif (error := _check_mechanism(deletion.mechanism)).is_failure:
            fail(deletion.name, error)
        elif (deletion.name, deletion.mechanism) not in image.scram_credentials:
            fail(deletion.name, ApiError(ErrorCode.RESOURCE_NOT_FOUND,
                                         "Attempt to delete a user credential that does not exist"))
        else:
            records.setdefault(deletion.name, []).append(
                RemoveUserScramCredentialRecord(name=deletion.name, mechanism=deletion.mechanism))
    for upsertion in request.upsertions:
        name = upsertion.name
        if not name:
            fail(name, ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"))
        elif pairs[(name, upsertion.mechanism)] > 1:
            fail(name, ApiError(ErrorCode.DUPLICATE_RESOURCE,
                                "A user credential cannot be altered twice in the same request"))
        elif not supported:
            fail(name, _UNSUPPORTED)
        elif (error := _check_mechanism(upsertion.mechanism)).is_failure:
            fail(name, error)
        elif upsertion.iterations < MIN_ITERATIONS:
            fail(name, ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"))
        elif upsertion.iterations > MAX_ITERATIONS:
            fail(name, ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"))
        else:
            credential = credential_from_salted_password(ScramMechanism(upsertion.mechanism),
                                                         bytes(upsertion.salted_password), bytes(upsertion.salt),
                                                         upsertion.iterations)
            records.setdefault(name, []).append(UserScramCredentialRecord(
                name=name, mechanism=upsertion.mechanism, salt=credential.salt, stored_key=credential.stored_key,
                server_key=credential.server_key, iterations=credential.iterations))
    Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    results, written = [], []
    for user in users:
        error = errors.get(user, _OK)
        if not error.is_failure:
            written.extend(records.get(user, []))
        results.append(Result(user=user, error_code=error.error_code, error_message=error.message))
    return ControllerResult(AlterUserScramCredentialsResponse(results=results), written)


def describe_user_scram_credentials(image: MetadataImage, request: DescribeUserScramCredentialsRequest
                                    ) -> DescribeUserScramCredentialsResponse:
    """Every user's mechanisms and iterations (null or empty `users`: every user that has a credential)."""
    Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
    Info = DescribeUserScramCredentialsResponse.CredentialInfo
    by_user: dict[str, list] = {}
    for (user, mechanism), credential in sorted(image.scram_credentials.items()):
        by_user.setdefault(user, []).append(Info(mechanism=mechanism, iterations=credential.iterations))
    requested = [entry.name for entry in request.users or []]
    if not requested:
        return DescribeUserScramCredentialsResponse(results=[
            Result(user=user, credential_infos=infos) for user, infos in by_user.items()])
    counts = Counter(requested)
    results = []
    for user in dict.fromkeys(requested):
        if counts[user] > 1:
            results.append(Result(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                  error_message="Cannot describe SCRAM credentials for the same user twice in a "
                                                "single request"))
        elif user not in by_user:
            results.append(Result(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                  error_message="Attempt to describe a user credential that does not exist"))
        else:
            results.append(Result(user=user, credential_infos=by_user[user]))
    return DescribeUserScramCredentialsResponse(results=results)
