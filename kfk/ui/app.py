"""`kfk ui`'s web application: server-rendered pages over ClusterView, plus small JSON endpoints the pages poll for
live figures (lag, throughput, reassignment progress).

Why Starlette + Jinja2 and no front-end framework: every page is a table or a form over a handful of Admin calls,
which server-side templates render in one round trip, readable without JavaScript; the only dynamic parts (numbers
that change every two seconds, one throughput chart) are a few dozen lines of plain JavaScript in static/. Starlette
is the small ASGI toolkit FastAPI itself is built on, Jinja2 the template engine most Python web code uses, and
uvicorn serves both; nothing is fetched from a CDN, so the console works on a closed network.

Every request that is not GET or HEAD must come from the console's own origin with the session's CSRF token (see
csrf.py): the templates put ``csrf_field`` in every form and ``csrf_token`` in a meta tag for the script.

Handlers are plain (synchronous) functions: Starlette runs them in its thread pool, and each Admin call crosses to the
client's own event loop thread, so a slow broker never blocks the server's loop. Actions are POST forms answered with
a redirect (post/redirect/get), their outcome carried in the query string as a notice or an error line.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from kfk.client.cluster_statistics import describe_cluster_statistics
from kfk.common.structs import TopicPartition
from kfk.common.uuids import uuid_to_base64
from kfk.errors import GroupIdNotFoundError, KafkaError, UnknownTopicOrPartitionError
from kfk.ui.cluster_view import ClusterView, describe_error, total_lag
from kfk.ui.auth import BasicAuth, LockedOut, PasswordLogins, client_address, login_cookie_header
from kfk.ui.csrf import TOKEN_FIELD, CsrfGuard
from kfk.ui.live_tail import TailResponse, TailSlots, tail_events
from kfk.ui.clusters import ClusterSelect
from kfk.ui.current_view import CurrentView
from kfk.ui.operator_sessions import OperatorClients, SaslLogin
from kfk.ui.message_search import DEFAULT_MAX_SCANNED, RecordFilter, parse_field_match
from kfk.ui.panels import Panels
from kfk.ui import security_edits
from kfk.ui.security_edits import QUOTA_ENTITY_TYPES, QUOTA_KEYS, SCRAM_MECHANISMS, quota_entity_fields
from kfk.security.acl import AclBinding, AclOperation, ResourceType

__all__ = ["create_app", "ConsoleSettings"]

_HERE = Path(__file__).parent
_HEADER = re.compile(r"^\s*([^:=]+?)\s*[:=]\s*(.*)$")


@dataclass(frozen=True)
class ConsoleSettings:
    read_only: bool = False
    refresh_ms: int = 2000
    # How long a live figure (the throughput chart) waits for the cluster before answering with what it has: during
    # an incident, the partitions that still answer are what the operator watches.
    live_timeout_ms: int = 3000
    # How long the overview waits for the cluster before it shows what it has (or the cluster as down).
    page_timeout_ms: int = 10000
    # The host names (Host header) the console answers to; None: any. A console on a loopback address answers only
    # to loopback names: otherwise a web page whose own name its attacker re-points at 127.0.0.1 (DNS rebinding)
    # would be the console's origin, read its CSRF token and post with it.
    allowed_hosts: tuple[str, ...] | None = None
    # How long one panel of a page waits for the cluster before the page renders without it (panels.py).
    panel_timeout_ms: int = 5000
    # With users (name -> password, from --users-file), every request must log in: the /login form's cookie, or HTTP
    # Basic (auth.py).
    users: dict[str, str] | None = None


def _redirect(path: str, **params: str) -> RedirectResponse:
    query = urlencode({key: value for key, value in params.items() if value})
    return RedirectResponse(f"{path}?{query}" if query else path, status_code=303)


def _int(value: str | None, name: str, default: int | None = None) -> int | None:
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise HTTPException(400, f"{name} must be a whole number, not {value!r}") from None


def _headers(text: str) -> list[tuple[str, bytes]]:
    """Headers typed one per line as ``name: value`` (or ``name=value``)."""
    headers = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _HEADER.match(line)
        if match is None:
            raise ValueError(f"a header is 'name: value', not {line!r}")
        headers.append((match.group(1), match.group(2).encode("utf-8")))
    return headers


def create_app(view: ClusterView | None, settings: ConsoleSettings = ConsoleSettings(),
               operators: OperatorClients | None = None, clusters: dict[str, ClusterView] | None = None) -> Starlette:
    """The console's ASGI app over ``view`` (which the caller owns and closes); or, with ``operators`` (--auth
    sasl), over each logged-in operator's own view; or, with ``clusters`` (--cluster), over the view of the cluster
    each URL names."""
    if operators is not None or clusters:
        view = CurrentView()  # type: ignore[assignment]
    assert view is not None
    templates = Jinja2Templates(directory=str(_HERE / "templates"), context_processors=[_csrf_context])
    templates.env.globals.update(read_only=settings.read_only, refresh_ms=settings.refresh_ms, quote=quote)
    templates.env.filters["timestamp"] = _timestamp
    templates.env.filters["topic_id"] = uuid_to_base64  # as Kafka's tools print topic ids
    templates.env.filters["bytes"] = _bytes
    templates.env.globals["kafka_login"] = operators is not None
    logins = PasswordLogins(settings.users) if settings.users else None
    templates.env.globals["password_login"] = logins is not None
    templates.env.globals["cluster_names"] = list(clusters or {})
    panels = Panels(settings.panel_timeout_ms)
    tail_slots = TailSlots()

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        context.setdefault("notice", request.query_params.get("notice"))
        context.setdefault("error", request.query_params.get("error"))
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    async def form_of(request: Request) -> FormData:
        if settings.read_only:
            raise HTTPException(403, "this console is read-only (started with --read-only)")
        return await request.form()

    # --- pages ------------------------------------------------------------------------------------------------

    def overview(request: Request) -> Response:
        """The cluster, or why it is not shown: the overview is where an operator looks first during an incident,
        so it never fails as a whole (the statistics alone may be missing) and it renders with the cluster down."""
        try:
            cluster = view.admin.describe_cluster(timeout_ms=settings.page_timeout_ms)
        except KafkaError as error:
            return page(request, "overview.html", status_code=503, cluster=None, statistics=None, addresses={},
                        problem=f"the cluster at {view.bootstrap_servers} does not answer: {describe_error(error)}")
        try:
            statistics = describe_cluster_statistics(view.admin, include_internal=True,
                                                     timeout_ms=settings.page_timeout_ms)
            problem = None
        except KafkaError as error:
            statistics, problem = None, f"no statistics of topics and groups: {describe_error(error)}"
        return page(request, "overview.html", cluster=cluster, statistics=statistics, problem=problem,
                    addresses={broker.node_id: broker for broker in cluster.brokers})

    def topics(request: Request) -> Response:
        descriptions = view.describe_topics(include_internal=True)
        return page(request, "topics.html", topics=sorted(descriptions.values(), key=lambda d: d.name))

    def topic(request: Request) -> Response:
        name = request.path_params["name"]
        description = view.admin.describe_topics([name])[name]
        partitions, partitions_note = panels.load("Log start and end offsets", lambda: view.partition_rows(description),
                                                  [], needs="DESCRIBE on the topic")
        configs, configs_note = panels.load("Configs", lambda: view.topic_configs(name), [],
                                            needs="DESCRIBE_CONFIGS on the topic")
        producers, producers_note = panels.load("Producers", lambda: view.topic_producers(description), [],
                                                needs="READ on the topic")
        sizes, sizes_note = panels.load("Sizes on disk", lambda: view.topic_replica_sizes(name), {},
                                        needs="DESCRIBE on the cluster")
        return page(request, "topic.html", topic=description, partitions=partitions, configs=configs,
                    producers=producers, sizes=sizes,
                    total_size=sum(size for by_broker in sizes.values() for size in by_broker.values()),
                    notes={"partitions": partitions_note, "configs": configs_note, "producers": producers_note,
                           "sizes": sizes_note})

    def messages(request: Request) -> Response:
        """One partition's records by offset or timestamp; or, with ``search``, the records of one or every
        partition that match a filter, scanned under a limit (message_search); the live tail starts from here."""
        name = request.path_params["name"]
        params = request.query_params
        description = view.admin.describe_topics([name])[name]
        numbers = sorted(info.partition for info in description.partitions)
        chosen = params.get("partition", "")
        partition = None if params.get("search") and chosen in ("", "all") else _int(chosen, "partition", 0)
        if partition is not None and partition not in numbers:
            raise HTTPException(404, f"topic {name} has no partition {partition}")
        context: dict[str, Any] = {"topic": description, "partition": partition, "searched": None, "notes": {}}
        if params.get("search"):
            try:
                record_filter = RecordFilter(params.get("key", ""), params.get("value", ""), params.get("header", ""),
                                             parse_field_match(params["field"]) if params.get("field") else None)
                limits = {"from_timestamp_ms": _moment(params.get("from_time"), "from time"),
                          "to_timestamp_ms": _moment(params.get("to_time"), "to time"),
                          "max_scanned": _int(params.get("max_scanned"), "max records scanned", DEFAULT_MAX_SCANNED),
                          "start_offsets": _offsets(params.get("resume")),
                          # Stops in time to answer within the panel's limit, saying where it stopped.
                          "timeout_s": max(1.0, settings.panel_timeout_ms / 1000 * 0.6)}
            except ValueError as error:
                raise HTTPException(400, str(error)) from None
            searched, note = panels.load(
                "Search", lambda: view.search(name, numbers if partition is None else [partition], record_filter,
                                              **limits), None, needs="READ on the topic")
            context.update(searched=searched, records=searched.records if searched else [], limit=50,
                           record_filter=record_filter, max_scanned=limits["max_scanned"], notes={"records": note},
                           log_start_offset=None, log_end_offset=None,
                           resume=",".join(f"{p}:{o}" for p, o in sorted(searched.next_offsets.items()))
                           if searched else "")
            return page(request, "messages.html", **context)
        timestamp = _int(params.get("timestamp"), "timestamp")
        offset, limit = _int(params.get("offset"), "offset"), _int(params.get("limit"), "limit", 50)
        (records, log_start_offset, log_end_offset), note = panels.load(
            "Records", lambda: view.browse(name, partition, offset=offset, timestamp_ms=timestamp, limit=limit),
            ([], None, None), needs="READ on the topic")
        context.update(records=records, log_start_offset=log_start_offset, log_end_offset=log_end_offset,
                       limit=limit, max_scanned=DEFAULT_MAX_SCANNED, notes={"records": note})
        return page(request, "messages.html", **context)

    def groups(request: Request) -> Response:
        listings, note = panels.load("Consumer groups", view.admin.list_consumer_groups, [],
                                     needs="DESCRIBE on the groups")
        return page(request, "groups.html", groups=sorted(listings, key=lambda listing: listing.group_id),
                    notes={"groups": note})

    def group(request: Request) -> Response:
        group_id = request.path_params["group_id"]
        description = view.describe_group(group_id)
        lag, note = panels.load("Offsets and lag", lambda: view.group_lag(group_id), [],
                                needs="DESCRIBE on the group and its topics")
        return page(request, "group.html", group=description, lag=lag, total_lag=total_lag(lag),
                    topics=sorted({row.topic for row in lag}), notes={"lag": note})

    def reassignments(request: Request) -> Response:
        cluster = view.admin.describe_cluster()
        listed, topics_note = panels.load("Topics", view.admin.list_topics, [], needs="DESCRIBE on the topics")
        in_progress, progress_note = panels.load("Reassignments in progress", view.reassignments_in_progress, [],
                                                 needs="DESCRIBE on the cluster")
        return page(request, "reassignments.html", brokers=cluster.brokers, topics=listed, in_progress=in_progress,
                    proposal=None, current=None, notes={"topics": topics_note, "in_progress": progress_note})

    def broker(request: Request) -> Response:
        broker_id = _int(request.path_params["broker_id"], "broker id")
        cluster = view.admin.describe_cluster()
        registered = {node.node_id: node for node in cluster.brokers}
        if broker_id not in registered:
            raise HTTPException(404, f"broker {broker_id} is not in the cluster")
        configs, note = panels.load("Configs", lambda: view.broker_configs(broker_id), [],
                                    needs="DESCRIBE_CONFIGS on the cluster")
        log_dirs, log_dirs_note = panels.load("Log directories", lambda: view.log_dirs([broker_id]), [],
                                              needs="DESCRIBE on the cluster")
        return page(request, "broker.html", broker=registered[broker_id], controller_id=cluster.controller_id,
                    configs=configs, log_dirs=log_dirs, notes={"configs": note, "log_dirs": log_dirs_note})

    def security(request: Request, status_code: int = 200, **context: Any) -> Response:
        """ACLs, SCRAM users and client quotas, with their forms; a refused edit renders it again (``entered``: the
        refused form's fields, ``error``: why)."""
        acls, acls_note = panels.load("ACLs", view.admin.describe_acls, [], needs="DESCRIBE on the cluster")
        users, users_note = panels.load("SCRAM users", view.admin.describe_user_scram_credentials, {},
                                        needs="DESCRIBE on the cluster")
        quotas, quotas_note = panels.load("Client quotas", view.admin.describe_client_quotas, {},
                                          needs="DESCRIBE_CONFIGS on the cluster")
        return page(request, "security.html",
                    acls=sorted(acls, key=lambda acl: (acl.pattern.resource_type, acl.pattern.name,
                                                       acl.entry.principal, acl.entry.operation)),
                    users=sorted(users.items()),
                    quotas=sorted(quotas.items(), key=lambda item: item[0].sort_key()),
                    notes={"acls": acls_note, "users": users_note, "quotas": quotas_note}, status_code=status_code,
                    acl_operations=AclOperation, resource_types=ResourceType, scram_mechanisms=SCRAM_MECHANISMS,
                    quota_keys=QUOTA_KEYS, quota_entity_types=QUOTA_ENTITY_TYPES,
                    quota_entity_fields=quota_entity_fields, **context)

    def quorum(request: Request) -> Response:
        info, note = panels.load("The metadata quorum", view.admin.describe_metadata_quorum, None,
                                 needs="DESCRIBE on the cluster")
        return page(request, "quorum.html", quorum=info, notes={"quorum": note})

    def transactions(request: Request) -> Response:
        listed, note = panels.load("Transactions", view.admin.list_transactions, [],
                                   needs="DESCRIBE on the transactional ids")
        return page(request, "transactions.html", transactions=sorted(listed, key=lambda t: t.transactional_id),
                    notes={"transactions": note})

    # --- login (--auth basic; auth.py) ---------------------------------------------------------------------------

    def login_form(request: Request, status_code: int = 200, target: str | None = None, entered_name: str = "",
                   **context: Any) -> Response:
        """The login form; a visitor logged in already goes on to ``next``."""
        target = target or _local_path(request.query_params.get("next", "/"))
        if getattr(request.state, "user", None) and status_code == 200:
            return _redirect(target)
        return page(request, "login.html", status_code=status_code, next=target, entered_name=entered_name,
                    **context)

    async def log_in(request: Request) -> Response:
        assert logins is not None
        form = await request.form()
        name, password = str(form.get("name", "")).strip(), str(form.get("password", ""))
        target = _local_path(str(form.get("next", "/")))
        try:
            accepted = logins.check(name, password, client_address(request.scope))  # an HMAC: no thread needed
        except LockedOut as locked:
            return login_form(request, 429, target, name, error=str(locked))
        if not accepted:
            return login_form(request, 401, target, name, error="wrong user name or password")
        request.state.user = name  # for the action log's line of this request
        response = _redirect(target)
        response.headers.append("set-cookie", login_cookie_header(
            logins.session_cookie(name), secure=request.url.scheme == "https",
            max_age_s=logins.session_max_age_s))
        return response

    async def log_out(request: Request) -> Response:
        assert logins is not None
        user = getattr(request.state, "user", None)
        if user:
            logins.log_out(user)
        response = _redirect("/login", notice=f"logged out {user}" if user else "")
        response.headers.append("set-cookie", login_cookie_header("", secure=request.url.scheme == "https",
                                                                  max_age_s=0))
        return response

    # --- actions ----------------------------------------------------------------------------------------------

    async def create_topic(request: Request) -> Response:
        form = await form_of(request)
        entered = {field: str(form.get(field, "")) for field in ("name", "partitions", "replication_factor", "configs")}
        name = entered["name"].strip()

        async def refused(reason: str) -> Response:
            """The topics page again, the form open with what was typed in it, and why it was refused."""
            try:
                listed = sorted((await _run(view.describe_topics, True)).values(), key=lambda d: d.name)
            except KafkaError:
                listed = []
            return page(request, "topics.html", status_code=400, topics=listed, entered=entered, error=reason)

        configs = {}
        for line in entered["configs"].splitlines():
            if line.strip():
                key, sep, value = line.partition("=")
                if not sep:
                    return await refused(f"a config is key=value, not {line.strip()!r}")
                configs[key.strip()] = value.strip()
        try:
            partitions = _int(entered["partitions"], "partitions", -1)
            replication_factor = _int(entered["replication_factor"], "replication factor", -1)
        except HTTPException as error:
            return await refused(error.detail)
        try:
            await _run(view.create_topic, name, partitions, replication_factor, configs)
        except (KafkaError, ValueError) as error:
            return await refused(f"cannot create {name!r}: {describe_error(error)}")
        return _redirect(f"/topics/{quote(name, safe='')}", notice=f"created topic {name}")

    async def delete_topic(request: Request) -> Response:
        await form_of(request)
        name = request.path_params["name"]
        try:
            await _run(view.delete_topic, name)
        except KafkaError as error:
            return _redirect(f"/topics/{quote(name, safe='')}", error=f"cannot delete: {describe_error(error)}")
        return _redirect("/topics", notice=f"deleted topic {name}")

    async def alter_config(request: Request) -> Response:
        """Set a topic config (op=set, name, value) or delete its override (op=delete, name)."""
        form = await form_of(request)
        topic_name = request.path_params["name"]
        back = f"/topics/{quote(topic_name, safe='')}"
        key = str(form.get("config", "")).strip()
        delete = form.get("op") == "delete"
        value = None if delete else str(form.get("value", "")).strip()
        if not key:
            return _redirect(back, error="name the config to change")
        try:
            await _run(view.alter_topic_config, topic_name, key, value)
        except KafkaError as error:
            return _redirect(back, error=f"cannot change {key}: {describe_error(error)}")
        return _redirect(back, notice=f"deleted the override of {key}: the default applies" if delete
                         else f"set {key}={value}")

    async def produce(request: Request) -> Response:
        form = await form_of(request)
        name = request.path_params["name"]
        back = f"/topics/{quote(name, safe='')}/messages"
        partition_text = str(form.get("partition", "")).strip()
        try:
            partition = int(partition_text) if partition_text else None
            headers = _headers(str(form.get("headers", "")))
        except ValueError as error:
            return _redirect(back, error=str(error))
        key_text = str(form.get("key", ""))
        value_text = str(form.get("value", ""))
        try:
            written_partition, offset = await _run(
                view.produce, name, value_text.encode("utf-8"), key_text.encode("utf-8") if key_text else None,
                headers, partition)
        except KafkaError as error:
            return _redirect(back, error=f"produce failed: {describe_error(error)}")
        return _redirect(back, partition=str(written_partition), offset=str(offset),
                         notice=f"produced to partition {written_partition} at offset {offset}")

    async def reset_offsets(request: Request) -> Response:
        form = await form_of(request)
        group_id = request.path_params["group_id"]
        back = f"/groups/{quote(group_id, safe='')}"
        topic_name = str(form.get("topic", ""))
        to = str(form.get("to", "")).strip()
        if form.get("confirm") != "yes":  # first the plan, as kafka-consumer-groups' --dry-run, and a button to go on
            try:
                plan = await _run(view.plan_offset_reset, topic_name, to)
                description = await _run(view.describe_group, group_id)
                lag = await _run(view.group_lag, group_id)
            except (KafkaError, ValueError) as error:
                return _redirect(back, error=f"cannot reset offsets: {describe_error(error)}")
            current = {(row.topic, row.partition): row.committed_offset for row in lag}
            return page(request, "group.html", group=description, lag=lag, total_lag=total_lag(lag),
                        topics=sorted({row.topic for row in lag}), reset_to=to, reset_topic=topic_name,
                        reset_plan=[(tp.partition, current.get((tp.topic, tp.partition)), offset)
                                    for tp, offset in sorted(plan.items())])
        try:
            targets = await _run(view.reset_group_offsets, group_id, topic_name, to)
        except (KafkaError, ValueError) as error:
            return _redirect(back, error=f"cannot reset offsets: {describe_error(error)}")
        return _redirect(back, notice=f"reset {len(targets)} partition(s) of {topic_name} to {to}")

    async def delete_group(request: Request) -> Response:
        await form_of(request)
        group_id = request.path_params["group_id"]
        try:
            await _run(view.delete_group, group_id)
        except KafkaError as error:
            return _redirect(f"/groups/{quote(group_id, safe='')}", error=f"cannot delete: {describe_error(error)}")
        return _redirect("/groups", notice=f"deleted group {group_id}")

    async def delete_group_offsets(request: Request) -> Response:
        form = await form_of(request)
        group_id = request.path_params["group_id"]
        back = f"/groups/{quote(group_id, safe='')}"
        topic_name = str(form.get("topic", ""))
        try:
            count = await _run(view.delete_group_offsets, group_id, topic_name)
        except (KafkaError, ValueError) as error:
            return _redirect(back, error=f"cannot delete offsets: {describe_error(error)}")
        return _redirect(back, notice=f"deleted the committed offsets of {count} partition(s) of {topic_name}")

    async def security_edit(request: Request) -> Response:
        """Every edit of the security page (its URL names which): the form read into one Admin call (security_edits);
        a refusal, by the form or the cluster, shows the page again with the form as it was typed and why."""
        edit = request.path_params["edit"]
        form = await form_of(request)
        entered = {key: str(value) for key, value in form.items() if key != TOKEN_FIELD and key != "password"}
        try:
            if edit == "create-acl":
                binding = security_edits.acl_binding(entered)
                error = (await _run(view.admin.create_acls, [binding]))[binding]
                done = f"created the ACL {_acl_text(binding)}"
            elif edit == "delete-acl":
                binding = security_edits.acl_binding(entered)
                outcome = (await _run(view.admin.delete_acls, [security_edits.acl_filter(binding)]))
                deleted = next(iter(outcome.values()))
                error = deleted if isinstance(deleted, KafkaError) else None
                done = f"deleted the ACL {_acl_text(binding)}" if deleted else "no such ACL (deleted already?)"
            elif edit in ("set-user", "delete-user"):
                alteration = (security_edits.scram_upsertion(dict(entered, password=str(form.get("password", ""))))
                              if edit == "set-user" else security_edits.scram_deletion(entered))
                error = (await _run(view.admin.alter_user_scram_credentials, [alteration]))[alteration.user]
                done = (f"set the {alteration.mechanism} credential of {alteration.user}" if edit == "set-user"
                        else f"deleted the {alteration.mechanism} credential of {alteration.user}")
            elif edit in ("set-quotas", "remove-quotas"):
                quotas = security_edits.quota_alteration(entered, remove_all=edit == "remove-quotas")
                error = (await _run(view.admin.alter_client_quotas, [quotas]))[quotas.entity]
                done = "; ".join(f"removed {key}" if value is None else f"set {key}={value:g}"
                                 for key, value in quotas.ops.items()) + f" of {quotas.entity}"
            else:
                raise HTTPException(404, f"no security edit {edit!r}")
            if error is not None:
                raise error
        except (KafkaError, ValueError) as refusal:
            reason = describe_error(refusal) if isinstance(refusal, KafkaError) else str(refusal)
            return await _run(lambda: security(request, status_code=400, entered={edit: entered},
                                               error=f"{edit.replace('-', ' ')}: {reason}"))
        return _redirect("/security", notice=done)

    async def elect(request: Request) -> Response:
        form = await form_of(request)
        topic_name = str(form.get("topic", "")).strip() or None
        back = str(form.get("back", "/")) or "/"
        if not back.startswith("/"):
            back = "/"
        try:
            elected, errors = await _run(view.elect_preferred_leaders, topic_name)
        except KafkaError as error:
            return _redirect(back, error=f"election failed: {describe_error(error)}")
        if errors:
            return _redirect(back, error="; ".join(errors))
        return _redirect(back, notice=f"preferred replica election: {elected} partition(s) changed leader")

    async def generate(request: Request) -> Response:
        form = await form_of(request)
        chosen_topics = [str(value) for value in form.getlist("topics")]
        try:
            broker_ids = [int(value) for value in form.getlist("brokers")]
            if not chosen_topics or not broker_ids:
                raise ValueError("choose at least one topic and one broker")
            current = await _run(view.current_assignment, chosen_topics)
            proposal = await _run(view.propose_reassignment, chosen_topics, broker_ids)
        except (KafkaError, ValueError) as error:
            return _redirect("/reassignments", error=f"cannot generate: {describe_error(error)}")
        cluster = await _run(view.admin.describe_cluster)
        return page(request, "reassignments.html", brokers=cluster.brokers, topics=view.admin.list_topics(),
                    in_progress=view.reassignments_in_progress(), current=_plan_json(current),
                    proposal=_plan_json(proposal))

    async def execute(request: Request) -> Response:
        form = await form_of(request)
        try:
            plan = json.loads(str(form.get("plan", "")))
            proposal = {entry["topic"]: {} for entry in plan["partitions"]}
            for entry in plan["partitions"]:
                proposal[entry["topic"]][int(entry["partition"])] = [int(b) for b in entry["replicas"]]
        except (ValueError, KeyError, TypeError) as error:
            return _redirect("/reassignments", error=f"the plan is not a reassignment JSON: {error}")
        try:
            errors = await _run(view.start_reassignment, proposal)
        except KafkaError as error:
            return _redirect("/reassignments", error=f"cannot start: {describe_error(error)}")
        if errors:
            return _redirect("/reassignments", error="; ".join(errors))
        count = sum(len(partitions) for partitions in proposal.values())
        return _redirect("/reassignments", notice=f"reassignment of {count} partition(s) started")

    # --- JSON for the live parts --------------------------------------------------------------------------------

    def api_throughput(request: Request) -> Response:
        sample = view.throughput_sample(settings.live_timeout_ms, request.query_params.get("topic") or None)
        return JSONResponse({"time_ms": sample.time_ms, "total_offsets": sample.total_offsets,
                             "per_topic": sample.per_topic,
                             "missing": [{"topic": entry.topic, "partition": entry.partition, "reason": entry.reason}
                                         for entry in sample.missing],
                             "notes": sample.notes})

    def api_tail(request: Request) -> Response:
        """The live tail of a topic (one partition, or all), as server-sent events (live_tail): from ``from`` (the
        log end offsets the page saw, ``partition:offset,...``), else from the end offsets now."""
        name = request.path_params["name"]
        params = request.query_params
        description = view.admin.describe_topics([name])[name]
        numbers = sorted(info.partition for info in description.partitions)
        chosen = params.get("partition", "")
        try:
            record_filter = RecordFilter(params.get("key", ""), params.get("value", ""), params.get("header", ""),
                                         parse_field_match(params["field"]) if params.get("field") else None)
            given = _offsets(params.get("from")) or {}
        except ValueError as error:
            raise HTTPException(400, str(error)) from None
        partitions = numbers if chosen in ("", "all") else [_int(chosen, "partition")]
        if not set(partitions) <= set(numbers):
            raise HTTPException(404, f"topic {name} has no partition {chosen}")
        missing = [TopicPartition(name, p) for p in partitions if p not in given]
        ends = view.admin.end_offsets(missing) if missing else {}
        start_offsets = {p: given[p] if p in given else ends[TopicPartition(name, p)] for p in partitions}
        if not tail_slots.acquire():
            raise HTTPException(429, f"{tail_slots.limit} live tails are open already: close one first")
        return TailResponse(tail_events(view.browsing_consumer, name, start_offsets, record_filter),
                            tail_slots.release)

    def api_group_lag(request: Request) -> Response:
        group_id = request.path_params["group_id"]
        rows = view.group_lag(group_id)
        return JSONResponse({"group_id": group_id, "total_lag": total_lag(rows),
                             "partitions": [{"topic": row.topic, "partition": row.partition,
                                             "committed_offset": row.committed_offset,
                                             "log_end_offset": row.log_end_offset, "lag": row.lag,
                                             "member": row.member} for row in rows]})

    def api_reassignments(request: Request) -> Response:
        return JSONResponse({"in_progress": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": replicas, "adding": adding,
             "removing": removing} for tp, replicas, adding, removing in view.reassignments_in_progress()]})

    async def on_error(request: Request, error: Exception) -> Response:
        if isinstance(error, HTTPException):
            status, message = error.status_code, str(error.detail)
        elif isinstance(error, (UnknownTopicOrPartitionError, GroupIdNotFoundError)):
            status, message = 404, describe_error(error)
        elif isinstance(error, KafkaError):
            status, message = 503 if error.retriable else 400, describe_error(error)
        else:
            raise error
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        return page(request, "error.html", status_code=status, message=message, error=None)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        panels.close()

    def cluster_of(scope: dict[str, Any]) -> str:
        """The cluster a request acts on, for the action log: its name (--cluster) and bootstrap servers."""
        name = scope.get("state", {}).get("cluster")
        return f"cluster {name} ({view.bootstrap_servers})" if name else f"the cluster at {view.bootstrap_servers}"

    routes = [
        Route("/", overview),
        Route("/topics", topics),
        Route("/topics", create_topic, methods=["POST"]),
        Route("/topics/{name}", topic),
        Route("/topics/{name}/delete", delete_topic, methods=["POST"]),
        Route("/topics/{name}/configs", alter_config, methods=["POST"]),
        Route("/topics/{name}/messages", messages),
        Route("/topics/{name}/messages", produce, methods=["POST"]),
        Route("/groups", groups),
        Route("/groups/{group_id}", group),
        Route("/groups/{group_id}/reset", reset_offsets, methods=["POST"]),
        Route("/groups/{group_id}/delete", delete_group, methods=["POST"]),
        Route("/groups/{group_id}/delete-offsets", delete_group_offsets, methods=["POST"]),
        Route("/election", elect, methods=["POST"]),
        Route("/reassignments", reassignments),
        Route("/brokers/{broker_id}", broker),
        Route("/security", security),
        Route("/security/{edit}", security_edit, methods=["POST"]),
        Route("/quorum", quorum),
        Route("/transactions", transactions),
        Route("/reassignments/generate", generate, methods=["POST"]),
        Route("/reassignments/execute", execute, methods=["POST"]),
        Route("/api/throughput", api_throughput),
        Route("/api/topics/{name}/tail", api_tail),
        Route("/api/groups/{group_id}/lag", api_group_lag),
        Route("/api/reassignments", api_reassignments),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    if logins is not None:
        routes += [Route("/login", login_form), Route("/login", log_in, methods=["POST"]),
                   Route("/logout", log_out, methods=["POST"])]
    return Starlette(routes=routes,
                     middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=settings.allowed_hosts),
                                 *([Middleware(ClusterSelect, views=clusters)] if clusters else []),
                                 *([Middleware(BasicAuth, logins=logins)] if logins is not None else []),
                                 *([Middleware(SaslLogin, operators=operators)] if operators else []),
                                 Middleware(CsrfGuard, cluster_of=cluster_of)],
                     exception_handlers={HTTPException: on_error, KafkaError: on_error}, lifespan=lifespan)


def _csrf_context(request: Request) -> dict[str, Any]:
    """The session's CSRF token (CsrfGuard puts it on the request) for the page's forms and its script."""
    token = request.state.csrf_token
    return {"csrf_token": token, "user": getattr(request.state, "user", None),
            # With several clusters, every link of the page goes to the page's own cluster (clusters.py).
            "prefix": getattr(request.state, "cluster_prefix", ""),
            "cluster_name": getattr(request.state, "cluster", None),
            "csrf_field": Markup(f'<input type="hidden" name="{TOKEN_FIELD}" value="{escape(token)}">')}


async def _run(function: Any, *args: Any) -> Any:
    """Run a blocking ClusterView call off the server's event loop."""
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(function, *args)


def _timestamp(milliseconds: int) -> str:
    """A record timestamp as UTC ISO 8601 with milliseconds (negative: the record has none)."""
    if milliseconds < 0:
        return "none"
    moment = datetime.fromtimestamp(milliseconds / 1000, timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _bytes(count: int | None) -> str:
    """A size for a person (1024-based units, as df -h), the exact count being in the cell's title."""
    if count is None:
        return "unknown"
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"


def _moment(text: str | None, name: str) -> int | None:
    """A time typed as milliseconds since the epoch or as ISO 8601 (UTC unless it says otherwise)."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name} is milliseconds since the epoch or a date and time as 2026-12-06T09:30:00Z, "
                         f"not {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def _offsets(text: str | None) -> dict[int, int] | None:
    """``partition:offset,...`` (where a continued search or a tail starts)."""
    if text is None or not text.strip():
        return None
    offsets = {}
    for item in text.split(","):
        partition, separator, offset = item.partition(":")
        try:
            offsets[int(partition)] = int(offset)
        except ValueError:
            raise ValueError(f"offsets are partition:offset,..., not {text!r}") from None
    return offsets


def _acl_text(binding: AclBinding) -> str:
    """An ACL in one line, as kafka-acls.sh lists it."""
    pattern, entry = binding.pattern, binding.entry
    return (f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, "
            f"permissionType={entry.permission_type.name}) on {pattern.resource_type.name}:"
            f"{pattern.pattern_type.name}:{pattern.name}")


def _local_path(target: str) -> str:
    """Where a login leads: a path of the console itself (``next`` comes from the URL, so it must not lead off-site,
    as ``//evil.example`` or ``/\\evil.example`` would), else the overview."""
    if not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target


def _plan_json(plan: dict[str, dict[int, list[int]]]) -> str:
    """kafka-reassign-partitions' JSON (version 1, one entry per partition)."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": replicas}
        for topic, partitions in sorted(plan.items()) for partition, replicas in sorted(partitions.items())]})
