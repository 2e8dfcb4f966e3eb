"""Kafka Connect's REST API (Kafka's ConnectorsResource, ConnectorPluginsResource, RootResource) over a herder.

Paths, status codes, query parameters and JSON bodies are Kafka's, errors included ({"error_code": ..,
"message": ..}), so curl scripts and tools written for Kafka's workers work unchanged.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kfk import __version__
from kfk.connect import plugins
from kfk.connect.errors import (
    AlreadyExistsException,
    BadRequestException,
    ConnectException,
    NotFoundException,
    RebalanceNeededException,
)
from kfk.connect.herder import StandaloneHerder
from kfk.connect.session_keys import (
    SIGNATURE_ALGORITHM_HEADER,
    SIGNATURE_HEADER,
    ForbiddenException,
    ServiceUnavailableException,
)

STATUS_BY_EXCEPTION = ((NotFoundException, 404), (AlreadyExistsException, 409), (BadRequestException, 400),
                       (RebalanceNeededException, 409), (ForbiddenException, 403), (ServiceUnavailableException, 503))
REASONS = {404: "Not Found", 405: "Method Not Allowed", 415: "Unsupported Media Type"}


def json_response(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(), status,
                    media_type="application/json")


def error_response(status: int, message: str) -> Response:
    return json_response({"error_code": status, "message": message}, status)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


async def _body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw) if raw else None
    except ValueError as error:
        raise ConnectException(f"Unexpected character in the request body: {error}") from None


async def forward(request: Request, leader_url: str, recursive: bool = True) -> Response:
    """Kafka's request forwarding: a distributed worker that is not the leader passes a write on to the leader
    (or the leader to the worker that runs a task) and answers with its answer. `recursive` False: the next worker
    must not forward it again (Kafka's forward=false)."""
    body = await request.body()
    query = [(key, value) for key, value in request.query_params.multi_items() if key != "forward"]
    if not recursive:
        query.append(("forward", "false"))
    url = leader_url.rstrip("/") + request.url.path + (f"?{urllib.parse.urlencode(query)}" if query else "")

    def call() -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update((name, request.headers[name]) for name in (SIGNATURE_HEADER, SIGNATURE_ALGORITHM_HEADER)
                       if name in request.headers)  # an internal request's signature goes on with it
        outgoing = urllib.request.Request(url, data=body or None, method=request.method, headers=headers)
        try:
            with urllib.request.urlopen(outgoing, timeout=90) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    try:
        status, raw = await asyncio.to_thread(call)
    except OSError as error:
        return error_response(500, f"Error trying to forward REST request: {error}")
    return Response(raw, status, media_type="application/json" if raw else None)


def build_app(herder: StandaloneHerder, kafka_cluster_id: str | None) -> Starlette:
    async def root(request: Request) -> Response:
        return json_response({"version": __version__, "commit": "kfk", "kafka_cluster_id": kafka_cluster_id})

    async def connectors(request: Request) -> Response:
        if request.method == "POST":
            body = await _body(request)
            if not isinstance(body, dict):
                raise BadRequestException("Request body must be a JSON object")
            name = (body.get("name") or "").strip()
            config = dict(body.get("config") or {})
            if not name:
                raise BadRequestException("Connector name configuration must be provided")
            if "name" in config and config["name"] != name:
                raise BadRequestException(f"Connector name configuration ({config['name']}) doesn't match connector "
                                          f"name in the URL ({name})")
            _, info = herder.put_connector_config(name, config, allow_replace=False)
            return json_response(info, 201)
        expand = request.query_params.getlist("expand")
        names = herder.connector_names()
        if not expand:
            return json_response(names)
        result: dict[str, Any] = {}
        for name in names:
            entry: dict[str, Any] = {}
            if "status" in expand:
                entry["status"] = herder.connector_status(name)
            if "info" in expand:
                entry["info"] = herder.connector_info(name)
            result[name] = entry
        return json_response(result)

    async def connector(request: Request) -> Response:
        name = request.path_params["name"]
        if request.method == "DELETE":
            herder.delete_connector(name)
            return Response(status_code=204)
        return json_response(herder.connector_info(name))

    async def connector_config(request: Request) -> Response:
        name = request.path_params["name"]
        if request.method == "PATCH":
            patch = await _body(request)
            if not isinstance(patch, dict):
                raise BadRequestException("Request body must be a JSON object")
            if "name" in patch and patch["name"] != name:
                raise BadRequestException(f"Connector name configuration ({patch['name']}) doesn't match connector "
                                          f"name in the URL ({name})")
            return json_response(herder.patch_connector_config(name, patch))
        if request.method == "PUT":
            config = await _body(request)
            if not isinstance(config, dict):
                raise BadRequestException("Request body must be a JSON object")
            if "name" in config and config["name"] != name:
                raise BadRequestException(f"Connector name configuration ({config['name']}) doesn't match connector "
                                          f"name in the URL ({name})")
            created, info = herder.put_connector_config(name, config, allow_replace=True)
            return json_response(info, 201 if created else 200)
        return json_response(herder.connector_config(name))

    async def status(request: Request) -> Response:
        return json_response(herder.connector_status(request.path_params["name"]))

    async def restart(request: Request) -> Response:
        body = herder.restart_connector(request.path_params["name"], _flag(request, "includeTasks"),
                                        _flag(request, "onlyFailed"))
        return Response(status_code=204) if body is None else json_response(body, 202)

    async def pause(request: Request) -> Response:
        herder.pause(request.path_params["name"])
        return Response(status_code=202)

    async def resume(request: Request) -> Response:
        herder.resume(request.path_params["name"])
        return Response(status_code=202)

    async def stop(request: Request) -> Response:
        herder.stop_connector(request.path_params["name"])
        return Response(status_code=204)

    async def tasks(request: Request) -> Response:
        if request.method == "POST":  # the internal endpoint: a follower hands its connector's task configs over
            configs = await _body(request)
            if not isinstance(configs, list) or not all(isinstance(config, dict) for config in configs):
                raise BadRequestException("Request body must be a JSON array of task configurations")
            herder.put_task_configs(request.path_params["name"], configs, request.headers, await request.body())
            return Response(status_code=204)
        return json_response(herder.task_configs(request.path_params["name"]))

    async def task_status(request: Request) -> Response:
        return json_response(herder.task_status(request.path_params["name"], request.path_params["task"]))

    async def task_restart(request: Request) -> Response:
        """Whoever runs the task restarts it: another worker forwards the request to the leader, which forwards it
        to the task's worker (Kafka's NotLeaderException and NotAssignedException)."""
        may_forward = request.query_params.get("forward", "true").lower() != "false"
        target = herder.restart_task(request.path_params["name"], request.path_params["task"], may_forward)
        if target is not None:
            return await forward(request, target, recursive=herder.write_leader_url() is not None)
        return Response(status_code=204)

    async def topics(request: Request) -> Response:
        return json_response(herder.connector_topics(request.path_params["name"]))

    async def offsets(request: Request) -> Response:
        name = request.path_params["name"]
        if request.method == "DELETE":
            return json_response({"message": herder.reset_offsets(name)})
        if request.method == "PATCH":
            body = await _body(request)
            offsets = (body or {}).get("offsets") if isinstance(body, dict) else None
            if not offsets:  # checked before the connector is looked up, as Kafka does
                raise BadRequestException("Partitions / offsets need to be provided for an alter offsets request")
            return json_response({"message": herder.alter_offsets(name, offsets)})
        return json_response(herder.connector_offsets(name))

    async def connector_plugins(request: Request) -> Response:
        connectors_only = request.query_params.get("connectorsOnly", "true").lower() != "false"
        version = __version__
        listed = [{"class": plugin.class_name, "type": plugin.kind, "version": version}
                  for plugin in plugins.all_plugins()
                  if not connectors_only or plugin.kind in ("source", "sink")]
        if connectors_only:
            listed.sort(key=lambda item: item["class"])
        return json_response(listed)

    async def plugin_config(request: Request) -> Response:
        return json_response(herder.plugin_config(request.path_params["plugin"]))

    async def validate(request: Request) -> Response:
        config = await _body(request)
        if not isinstance(config, dict):
            raise BadRequestException("Request body must be a JSON object")
        return json_response(herder.validate(request.path_params["plugin"], config))

    async def connect_error(request: Request, error: Exception) -> Response:
        for exception_class, code in STATUS_BY_EXCEPTION:
            if isinstance(error, exception_class):
                return error_response(code, str(error))
        return error_response(500, str(error))

    async def http_error(request: Request, error: HTTPException) -> Response:
        return error_response(error.status_code, f"HTTP {error.status_code} {REASONS.get(error.status_code, '')}"
                              .rstrip())

    def writes_to_leader(handler):
        """Writes (every method but GET) go to the leader of a distributed group; a standalone herder takes them."""
        async def handle(request: Request) -> Response:
            if request.method != "GET":
                leader_url = herder.write_leader_url()
                if leader_url is not None:
                    return await forward(request, leader_url)
            return await handler(request)
        return handle

    connectors, connector, connector_config, restart, pause, resume, stop, tasks, offsets = map(
        writes_to_leader, (connectors, connector, connector_config, restart, pause, resume, stop, tasks, offsets))
    prefix = "/connectors/{name}"
    routes = [
        Route("/", root, methods=["GET"]),
        Route("/connectors", connectors, methods=["GET", "POST"]),
        Route(prefix, connector, methods=["GET", "DELETE"]),
        Route(prefix + "/config", connector_config, methods=["GET", "PUT", "PATCH"]),
        Route(prefix + "/status", status, methods=["GET"]),
        Route(prefix + "/restart", restart, methods=["POST"]),
        Route(prefix + "/pause", pause, methods=["PUT"]),
        Route(prefix + "/resume", resume, methods=["PUT"]),
        Route(prefix + "/stop", stop, methods=["PUT"]),
        Route(prefix + "/tasks", tasks, methods=["GET", "POST"]),
        Route(prefix + "/tasks/{task:int}/status", task_status, methods=["GET"]),
        Route(prefix + "/tasks/{task:int}/restart", task_restart, methods=["POST"]),
        Route(prefix + "/topics", topics, methods=["GET"]),
        Route(prefix + "/offsets", offsets, methods=["GET", "PATCH", "DELETE"]),
        Route("/connector-plugins", connector_plugins, methods=["GET"]),
        Route("/connector-plugins/{plugin}/config", plugin_config, methods=["GET"]),
        Route("/connector-plugins/{plugin}/config/validate", validate, methods=["PUT"]),
    ]
    return Starlette(routes=routes, exception_handlers={ConnectException: connect_error, Exception: connect_error,
                                                        HTTPException: http_error})
