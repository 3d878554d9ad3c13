"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 (KIP-554): the APIs
behind ``kafka-configs.sh --bootstrap-server … --entity-type users`` and ``Admin.alterUserScramCredentials``.

The client picks the salt and computes the salted password, so the password never crosses the
wire; we derive the stored and server keys (reference/security.md §4.3). Checks and error texts
follow Kafka's ``ZkAdminManager`` (alter and describe,
https://github.com/apache/kafka/blob/3.9.0/core/src/main/scala/kafka/server/ZkAdminManager.scala); a
user with any error is left unchanged. Describing needs DESCRIBE on the cluster, altering ALTER
(``KafkaApis.handleDescribeUserScramCredentialsRequest`` / ``handleAlterUserScramCredentialsRequest``).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from kafka.protocol.admin import AlterUserScramCredentialsResponse, DescribeUserScramCredentialsResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ..context import Handler, Reply, RequestContext
from ..security.acl import CLUSTER_NAME, AclOperation, Authorizer, NoAuthorizer, ResourceType
from ..security.sasl.scram_formatter import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
    mechanism_id,
    mechanism_name,
)
from ..security.scram_credentials import ScramCredentialStore

__all__ = ["ScramApis"]

AlterResult = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
DescribeResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo = DescribeResult.CredentialInfo
CLUSTER_AUTHORIZATION_FAILED_MESSAGE = "Cluster authorization failed."
_NO_AUTHORIZER = NoAuthorizer()


class ScramApis:
    def __init__(self, store: ScramCredentialStore, authorizer: Authorizer = _NO_AUTHORIZER) -> None:
        self.store = store
        self.authorizer = authorizer

    def _allowed(self, ctx: RequestContext, operation: AclOperation) -> bool:
        return self.authorizer.authorize(ctx.principal, ctx.client_host, operation, ResourceType.CLUSTER,
                                         CLUSTER_NAME)

    # --- DescribeUserScramCredentials ------------------------------------------------------------------

    def describe(self, ctx: RequestContext, request: KafkaRequest) -> Reply:
        if not self._allowed(ctx, AclOperation.DESCRIBE):
            return DescribeUserScramCredentialsResponse(
                version=ctx.api_version, throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message=CLUSTER_AUTHORIZATION_FAILED_MESSAGE, results=[])
        users = self.store.users()
        wanted = [u.name for u in request.users] if request.users else None
        results = []
        if wanted is None:  # every user that has a credential
            results = [self._described(name, users[name]) for name in sorted(users)]
        else:
            counts = Counter(wanted)
            for name in dict.fromkeys(wanted):  # request order, once each
                if counts[name] > 1:
                    results.append(DescribeResult(
                        user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                        error_message=f"Cannot describe SCRAM credentials for the same user twice in a single "
                                      f"request: {name}", credential_infos=[]))
                elif not users.get(name):
                    results.append(DescribeResult(
                        user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                        error_message=f"Attempt to describe a user credential that does not exist: {name}",
                        credential_infos=[]))
                else:
                    results.append(self._described(name, users[name]))
        return DescribeUserScramCredentialsResponse(version=ctx.api_version, throttle_time_ms=0,
                                                    error_code=ErrorCode.NONE, error_message=None, results=results)

    @staticmethod
    def _described(name: str, credentials: dict[str, ScramCredential]) -> object:
        infos = [CredentialInfo(mechanism=mechanism_id(mech), iterations=c.iterations)
                 for mech, c in sorted(credentials.items(), key=lambda item: mechanism_id(item[0]))]
        return DescribeResult(user=name, error_code=ErrorCode.NONE, error_message=None, credential_infos=infos)

    # --- AlterUserScramCredentials -----------------------------------------------------------------------

    def alter(self, ctx: RequestContext, request: KafkaRequest) -> Reply:
        names = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
        if not self._allowed(ctx, AclOperation.ALTER):
            return self._alter_response(ctx.api_version, names, {name: (
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED_MESSAGE) for name in names})
        errors: dict[str, tuple[int, str]] = {}

        def fail(name: str, code: int, message: str) -> None:
            errors.setdefault(name, (code, message))

        for u in request.upsertions:
            if not u.name:
                fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            elif mechanism_name(u.mechanism) is None:
                fail(u.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif u.iterations < MIN_ITERATIONS:
                fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif u.iterations > MAX_ITERATIONS:
                fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        for d in request.deletions:
            if not d.name:
                fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            elif mechanism_name(d.mechanism) is None:
                fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        pairs = Counter([(d.name, d.mechanism) for d in request.deletions]
                        + [(u.name, u.mechanism) for u in request.upsertions])
        for (name, _), count in pairs.items():
            if count > 1:
                fail(name, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        current = self.store.users()
        for d in request.deletions:
            mech = mechanism_name(d.mechanism)
            if mech is not None and mech not in current.get(d.name, {}):
                fail(d.name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        deletions = {(d.name, mechanism_name(d.mechanism) or "") for d in request.deletions if d.name not in errors}
        upserts: dict[tuple[str, str], ScramCredential] = {}
        for u in request.upsertions:
            mech = mechanism_name(u.mechanism)
            if u.name not in errors and mech is not None:
                # Hi() was computed by the client; we derive the keys and never see the password.
                upserts[(u.name, mech)] = credential_from_salted_password(mech, bytes(u.salted_password),
                                                                          bytes(u.salt), u.iterations)
        if not upserts and not deletions:
            return self._alter_response(ctx.api_version, names, errors)
        return self._apply(ctx.api_version, names, errors, upserts, deletions)

    async def _apply(self, version: int, names: list[str], errors: dict[str, tuple[int, str]],
                     upserts: dict[tuple[str, str], ScramCredential], deletions: set[tuple[str, str]]) -> KafkaResponse:
        try:
            await asyncio.to_thread(self.store.alter, upserts, deletions)  # fsync or ZooKeeper round trips
        except Exception as e:  # reported per user, as Kafka's ApiError.fromThrowable does
            for name in names:
                errors.setdefault(name, (ErrorCode.UNKNOWN_SERVER_ERROR, str(e)))
        return self._alter_response(version, names, errors)

    @staticmethod
    def _alter_response(version: int, names: list[str], errors: dict[str, tuple[int, str]]) -> KafkaResponse:
        results = [AlterResult(user=name, error_code=errors.get(name, (ErrorCode.NONE, None))[0],
                               error_message=errors.get(name, (ErrorCode.NONE, None))[1]) for name in names]
        return AlterUserScramCredentialsResponse(version=version, throttle_time_ms=0, results=results)

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.describe,
                ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.alter}
