"""Random schedules of client behaviour against the classic group state machine, with invariants after every step.

Clients act as real consumers do (join, rejoin when told, the leader assigns, sync, heartbeat, commit, leave) or
crash (go silent); the clock moves by random amounts, so sessions, rebalance timeouts and sync timeouts fire in
every order. After each step the group's bookkeeping must hold together, generations only grow, a Stable group's
assignments are the ones its leader sent, committed offsets match a table model, and a coordinator reloaded from
the log agrees on the group.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kfk.coordinator.group.classic_group import ClassicGroupState
from kfk.errors import ErrorCode
from tests.coordinator.harness import Answers, Harness
from tests.coordinator.test_offsets_and_loading import reload

GROUP = "g"
CLIENTS = 4
SESSION_MS = 1000
REBALANCE_MS = 2000

JOIN_ERRORS = {ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.UNKNOWN_MEMBER_ID,
               ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.FENCED_INSTANCE_ID}
SYNC_ERRORS = {ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS,
               ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID}
HEARTBEAT_ERRORS = {ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS,
                    ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID}


class Client:
    def __init__(self, index: int) -> None:
        self.index = index
        self.member_id = ""
        self.generation = -1
        self.join: Answers | None = None
        self.sync: Answers | None = None
        self.static = index == 0  # one static member among dynamic ones


class GroupMachine(RuleBasedStateMachine):
    @initialize(delay=st.sampled_from([0, 300]))
    def start(self, delay: int) -> None:
        self.h = Harness(initial_rebalance_delay_ms=delay, min_session_timeout_ms=100)
        self.clients = [Client(i) for i in range(CLIENTS)]
        self.max_generation = 0
        self.sent_assignments: dict[int, dict[str, bytes]] = {}
        self.committed: dict[int, int] = {}
        # A static member that rejoins under a new member id inherits the assignment its instance had (the point of
        # static membership: no rebalance), so its payload may name any member id the instance has held, including
        # ones a crashed process never heard of: learn them from answers and from the leader's member lists.
        self.static_member_ids: set[str] = set()

    def _join(self, client: Client) -> None:
        client.join = self.h.join(GROUP, client.member_id, session_timeout_ms=SESSION_MS,
                                  rebalance_timeout_ms=REBALANCE_MS,
                                  group_instance_id=f"static-{client.index}" if client.static else None)

    def _collect(self) -> None:
        """Read the answers that arrived, as each client's callback would."""
        for client in self.clients:
            if client.join:
                answer = client.join[-1]
                assert answer.error_code in JOIN_ERRORS, answer
                client.join = None
                if answer.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                    client.member_id = answer.member_id
                    self._join(client)
                elif answer.error_code == ErrorCode.NONE:
                    client.member_id, client.generation = answer.member_id, answer.generation_id
                    if client.static:
                        self.static_member_ids.add(answer.member_id)
                    self.static_member_ids.update(
                        m.member_id for m in answer.members if m.group_instance_id == "static-0")
                    if answer.leader == answer.member_id:
                        assignment = {m.member_id: f"{m.member_id}@{answer.generation_id}".encode()
                                      for m in answer.members}
                        self.sent_assignments[answer.generation_id] = assignment
                    else:
                        assignment = None
                    client.sync = self.h.sync(GROUP, client.member_id, client.generation, assignment,
                                              group_instance_id=f"static-{client.index}" if client.static else None)
                elif answer.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    client.member_id, client.generation = "", -1
            if client.sync:
                answer = client.sync[-1]
                assert answer.error_code in SYNC_ERRORS, answer
                client.sync = None
                if answer.error_code == ErrorCode.NONE:
                    owners = {client.member_id} | (self.static_member_ids if client.static else set())
                    assert answer.assignment in {b""} | {f"{owner}@{client.generation}".encode() for owner in owners}
                elif answer.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    client.member_id, client.generation = "", -1

    @rule(index=st.integers(0, CLIENTS - 1))
    def join(self, index: int) -> None:
        client = self.clients[index]
        if client.join is None and client.sync is None:
            self._join(client)
        self._collect()

    @rule(index=st.integers(0, CLIENTS - 1))
    def heartbeat(self, index: int) -> None:
        client = self.clients[index]
        if client.member_id and client.join is None:
            error = self.h.heartbeat(GROUP, client.member_id, client.generation,
                                     f"static-{client.index}" if client.static else None)
            assert error in HEARTBEAT_ERRORS, error
            if error == ErrorCode.REBALANCE_IN_PROGRESS:
                self._join(client)
            elif error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                client.member_id, client.generation = "", -1
        self._collect()

    @rule(index=st.integers(0, CLIENTS - 1), offset=st.integers(0, 100))
    def commit(self, index: int, offset: int) -> None:
        client = self.clients[index]
        if client.member_id and client.join is None and client.sync is None:
            answer = self.h.commit(GROUP, {("t", index): offset}, member_id=client.member_id,
                                   generation_id=client.generation,
                                   group_instance_id=f"static-{client.index}" if client.static else None)
            if answer and answer.only[("t", index)] == ErrorCode.NONE:
                self.committed[index] = offset
        self._collect()

    @rule(index=st.integers(0, CLIENTS - 1))
    def leave(self, index: int) -> None:
        client = self.clients[index]
        if client.member_id and not client.static:
            self.h.leave(GROUP, client.member_id)
            client.member_id, client.generation, client.join, client.sync = "", -1, None, None
        self._collect()

    @rule(index=st.integers(0, CLIENTS - 1))
    def crash(self, index: int) -> None:
        """The process dies: no LeaveGroup, no more heartbeats; a restart starts without a member id."""
        self.clients[index] = Client(index)
        self._collect()

    @rule(ms=st.sampled_from([10, 200, 600, 1100, 2500]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)
        self._collect()

    @invariant()
    def bookkeeping_holds_together(self) -> None:
        if not hasattr(self, "h"):
            return
        group = self.h.coordinator.groups.group(GROUP)
        if group is None:
            return
        members = group.members
        assert group.generation_id >= self.max_generation
        self.max_generation = group.generation_id
        assert group.num_members_awaiting_join == sum(m.is_awaiting_join for m in members.values())
        assert group.pending_sync_members <= set(members)
        assert set(group.static_members.values()) <= set(members)
        assert all(members[m].group_instance_id == i for i, m in group.static_members.items())
        if members:
            assert group.leader_id in members
            assert not group.is_in_state(ClassicGroupState.EMPTY)
        else:
            assert group.is_in_state(ClassicGroupState.EMPTY, ClassicGroupState.PREPARING_REBALANCE)
        assert sum(group.supported_protocols.values()) == sum(len(m.supported_protocols) for m in members.values())
        if group.is_in_state(ClassicGroupState.STABLE):
            sent = self.sent_assignments.get(group.generation_id, {})
            for member in members.values():
                if member.member_id in sent:
                    assert member.assignment == sent[member.member_id]
                else:  # a static member that rejoined under a new id keeps its assignment, no rebalance
                    assert member.is_static and member.assignment.endswith(f"@{group.generation_id}".encode())

    @invariant()
    def offsets_match_the_model(self) -> None:
        if not hasattr(self, "h"):
            return
        for index, offset in self.committed.items():
            assert self.h.committed(GROUP, "t", index) == offset

    def teardown(self) -> None:
        if not hasattr(self, "h"):
            return
        group = self.h.coordinator.groups.group(GROUP)
        fresh = reload(self.h).coordinator.groups.group(GROUP)
        if group is not None and group.is_in_state(ClassicGroupState.STABLE, ClassicGroupState.EMPTY) \
                and group.generation_id > 0:
            assert fresh is not None and fresh.generation_id == group.generation_id
            assert set(fresh.members) == set(group.members) or group.is_in_state(ClassicGroupState.EMPTY)


TestGroupMachine = GroupMachine.TestCase
TestGroupMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
