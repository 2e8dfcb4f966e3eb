"""Authorization overhead: what checking ACLs costs a request, with 10,000 ACLs in the cluster.

    python bench/bench_authorizer.py [--acls 10000] [--requests 20000]

Two figures. The Authorizer alone: µs per authorize() of a topic an ACL allows (a literal ACL among --acls others),
of a topic only a prefixed ACL allows, and of one no ACL names, and the time to rebuild the index after a change.
Then whole requests: one-partition ProduceRequests (31 x 1 KiB records) dispatched into a broker in this process
(bench_produce_requests.in_process_broker: no sockets), CPU µs per request with authorization off, and on with
--acls ACLs (90 % literal on other topics for other users, 10 % prefixed) plus the one that lets the producing
principal write; the difference is the overhead per request. Medians of --rounds alternating rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wire_load  # noqa: E402
from bench_produce_requests import TOPIC, _body, in_process_broker, produce_requests  # noqa: E402

from kfk.protocol.headers import decode_response  # noqa: E402
from kfk.protocol.messages import ApiKey  # noqa: E402
from kfk.protocol.messages.create_acls import CreateAclsRequest  # noqa: E402
from kfk.security.acl import (  # noqa: E402
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kfk.security.authorizer import Authorizer  # noqa: E402
from kfk.security.principal import KafkaPrincipal  # noqa: E402

PRODUCER = KafkaPrincipal.parse("User:producer")
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}


def other_acls(count: int) -> list[AclBinding]:
    """`count` ACLs of other users: 90 % literal on topics of their own, 10 % prefixed."""
    prefixed = count // 10
    acls = [AclBinding(ResourcePattern(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL),
                       AccessControlEntry(f"User:user-{i}", "*", AclOperation.WRITE, AclPermissionType.ALLOW))
            for i in range(count - prefixed)]
    acls += [AclBinding(ResourcePattern(ResourceType.TOPIC, f"team-{i}-", PatternType.PREFIXED),
                        AccessControlEntry(f"User:user-{i}", "*", AclOperation.READ, AclPermissionType.ALLOW))
             for i in range(prefixed)]
    return acls


def authorizer_alone(count: int) -> None:
    acls = other_acls(count) + [
        AclBinding(ResourcePattern(ResourceType.TOPIC, TOPIC, PatternType.LITERAL),
                   AccessControlEntry(str(PRODUCER), "*", AclOperation.WRITE, AclPermissionType.ALLOW)),
        AclBinding(ResourcePattern(ResourceType.TOPIC, "prod-", PatternType.PREFIXED),
                   AccessControlEntry(str(PRODUCER), "*", AclOperation.WRITE, AclPermissionType.ALLOW))]
    authorizer = Authorizer(acls=acls)
    print(f"Authorizer with {len(acls):,} ACLs")
    for label, name in (("literal ACL allows", TOPIC), ("prefixed ACL allows", "prod-orders"),
                        ("no ACL names it", "nobody-s-topic")):
        calls = 100_000
        seconds = min(timeit.repeat(lambda: authorizer.authorize(PRODUCER, "127.0.0.1", AclOperation.WRITE,
                                                                 ResourceType.TOPIC, name), number=calls, repeat=5))
        print(f"  authorize() WRITE, {label:<20} {seconds / calls * 1e6:8.2f} µs")
    seconds = min(timeit.repeat(lambda: authorizer.update(acls), number=1, repeat=3))
    print(f"  rebuilding the index                       {seconds * 1e3:8.1f} ms")


async def per_request(acls: int | None, requests: int) -> float:
    """CPU µs per one-partition ProduceRequest from PRODUCER; `acls` None: authorization off."""
    async with in_process_broker(TOPIC, 1, None if acls is None else AUTHORIZER) as dispatch:
        if acls is not None:
            wanted = other_acls(acls) + [AclBinding(
                ResourcePattern(ResourceType.TOPIC, TOPIC, PatternType.LITERAL),
                AccessControlEntry(str(PRODUCER), "*", AclOperation.WRITE, AclPermissionType.ALLOW))]
            for start in range(0, len(wanted), 1000):
                await dispatch(_body(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
                    resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                    resource_pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
                    operation=b.entry.operation, permission_type=b.entry.permission_type)
                    for b in wanted[start:start + 1000]]), 3))
        batch, _ = wire_load.build_batch(1024, 31 * 1060)
        (frame,) = [_body(message, wire_load.PRODUCE_VERSION) for message in produce_requests(1, 1, batch)]
        chunks = await dispatch(bytearray(frame), principal=PRODUCER)
        _, response = decode_response(b"".join(bytes(chunk) for chunk in chunks)[4:], ApiKey.PRODUCE,
                                      wire_load.PRODUCE_VERSION)
        error = response.responses[0].partition_responses[0].error_code
        assert error == 0, f"the producer's request failed: error {error}"
        start = time.process_time()
        for _ in range(requests):
            await dispatch(bytearray(frame), principal=PRODUCER)
        return (time.process_time() - start) / requests * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    authorizer_alone(args.acls)
    off, on = [], []
    for _ in range(args.rounds):
        off.append(asyncio.run(per_request(None, args.requests)))
        on.append(asyncio.run(per_request(args.acls, args.requests)))
    off_median, on_median = statistics.median(off), statistics.median(on)
    print(f"ProduceRequest (1 partition, 31 x 1 KiB), CPU µs per request, median of {args.rounds} rounds")
    print(f"  authorization off                          {off_median:8.1f} µs")
    print(f"  StandardAuthorizer, {args.acls + 1:,} ACLs              {on_median:8.1f} µs")
    print(f"  overhead                                   {on_median - off_median:8.1f} µs "
          f"({(on_median - off_median) / off_median * 100:+.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
