"""Confluent Schema Registry's REST API over a SchemaRegistry, as a Starlette application (the ASGI toolkit kfk's
web console already uses, served by uvicorn). Answers are ``application/vnd.schemaregistry.v1+json``; refusals are
``{"error_code": ..., "message": ...}`` with Confluent's codes and statuses.

Schema contexts: subjects qualified as ``:.ctx:subject`` live in context ``.ctx`` (GET /contexts lists them), and a
client may use ``http://host:port/contexts/.ctx`` as its registry URL: requests under that base path are rewritten to
the qualified subjects (``context_path``), as Confluent's registry does.

Writes run in Starlette's thread pool, because a write waits for its record to come back through the _schemas
topic; reads run on the event loop. On a secondary instance, writes are forwarded to the primary (``forward``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from kfk.registry.errors import RegistryError, invalid_schema
from kfk.registry.schema_types import AVRO, SCHEMA_TYPES
from kfk.registry.service import SchemaRegistry
from kfk.registry.state import RegisteredVersion

__all__ = ["create_app", "CONTENT_TYPE"]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

Forward = Callable[[str, str, bytes, dict[str, str]], tuple[int, bytes] | None]


def _answer(document: Any, status: int = 200) -> Response:
    return Response(json.dumps(document), status_code=status, media_type=CONTENT_TYPE)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def _version_json(version: RegisteredVersion, schema: str | None = None) -> dict:
    return {"subject": version.subject, "version": version.version, "id": version.schema_id,
            **_schema_json(version, schema)}


def _schema_json(version: RegisteredVersion, schema: str | None = None) -> dict:
    document: dict[str, Any] = {}
    if version.schema_type != AVRO:
        document["schemaType"] = version.schema_type
    if version.references:
        document["references"] = [reference.to_json() for reference in version.references]
    document["schema"] = version.schema if schema is None else schema
    return document


def create_app(registry: SchemaRegistry, forward: Forward | None = None) -> ASGIApp:
    """``forward(method, path_and_query, body, headers)`` sends a write to the primary and returns its (status,
    body), or None when this instance is the primary and must answer itself."""

    async def body(request: Request) -> Any:
        raw = await request.body()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise RegistryError(400, 400, "Unrecognized request body: not JSON") from None

    def write(handler: Callable[[Request, Any], Response]) -> Callable:
        async def endpoint(request: Request) -> Response:
            raw = await request.body()
            if forward is not None:
                path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                forwarded = await _in_thread(forward, request.method, path, raw,
                                             {"Content-Type": request.headers.get("content-type", CONTENT_TYPE)})
                if forwarded is not None:
                    status, content = forwarded
                    if status < 300:  # read your writes: this instance's next answer includes what the primary did
                        await _in_thread(registry.store.catch_up)
                    return Response(content, status_code=status, media_type=CONTENT_TYPE)
            document = await body(request)
            return await _in_thread(handler, request, document)
        return endpoint

    def read(handler: Callable[[Request], Response]) -> Callable:
        """A read runs on the event loop itself: it only takes the state's lock, which a record's apply holds for
        microseconds, so a thread hop would cost more than it saves."""
        async def endpoint(request: Request) -> Response:
            return handler(request)
        return endpoint

    # --- handlers ----------------------------------------------------------------------------------------------------

    def root(request: Request) -> Response:
        return _answer({})

    def list_subjects(request: Request) -> Response:
        return _answer(registry.subjects(_flag(request, "deleted"), request.query_params.get("subjectPrefix", "")))

    def list_versions(request: Request) -> Response:
        return _answer(registry.versions(request.path_params["subject"], _flag(request, "deleted")))

    def formatted(request: Request, version: RegisteredVersion) -> str:
        return registry.formatted(version, request.query_params.get("format", ""))

    def get_version(request: Request) -> Response:
        version = registry.version(request.path_params["subject"], request.path_params["version"],
                                   _flag(request, "deleted"))
        return _answer(_version_json(version, formatted(request, version)))

    def get_version_schema(request: Request) -> Response:
        version = registry.version(request.path_params["subject"], request.path_params["version"],
                                   _flag(request, "deleted"))
        return Response(formatted(request, version), media_type=CONTENT_TYPE)

    def referenced_by(request: Request) -> Response:
        return _answer(registry.referenced_by(request.path_params["subject"], request.path_params["version"]))

    def register(request: Request, document: Any) -> Response:
        version = registry.register(request.path_params["subject"], document, _flag(request, "normalize"))
        return _answer({"id": version.schema_id, "version": version.version, **_schema_json(version)})

    def lookup(request: Request, document: Any) -> Response:
        version = registry.lookup(request.path_params["subject"], document, _flag(request, "deleted"),
                                  _flag(request, "normalize"))
        return _answer(_version_json(version))

    def delete_subject(request: Request, document: Any) -> Response:
        return _answer(registry.delete_subject(request.path_params["subject"], _flag(request, "permanent")))

    def delete_version(request: Request, document: Any) -> Response:
        return _answer(registry.delete_version(request.path_params["subject"], request.path_params["version"],
                                               _flag(request, "permanent")))

    def schema_by_id(request: Request) -> Response:
        version = registry.schema_by_id(_schema_id(request), request.query_params.get("subject"))
        return _answer(_schema_json(version, formatted(request, version)))

    def schema_by_id_text(request: Request) -> Response:
        version = registry.schema_by_id(_schema_id(request), request.query_params.get("subject"))
        return Response(formatted(request, version), media_type=CONTENT_TYPE)

    def schema_subjects(request: Request) -> Response:
        usages = registry.id_usages(_schema_id(request), _flag(request, "deleted"), request.query_params.get("subject"))
        return _answer(sorted({version.subject for version in usages}))

    def schema_versions(request: Request) -> Response:
        usages = registry.id_usages(_schema_id(request), _flag(request, "deleted"), request.query_params.get("subject"))
        return _answer([{"subject": version.subject, "version": version.version} for version in usages])

    def schema_types(request: Request) -> Response:
        return _answer(list(SCHEMA_TYPES))

    def contexts(request: Request) -> Response:
        return _answer(registry.contexts())

    def compatibility(request: Request, document: Any) -> Response:
        reasons = registry.test_compatibility(request.path_params["subject"], request.path_params.get("version"),
                                              document)
        answer: dict[str, Any] = {"is_compatible": not reasons}
        if _flag(request, "verbose"):
            answer["messages"] = reasons
        return _answer(answer)

    def get_config(request: Request) -> Response:
        subject = request.path_params.get("subject")
        return _answer({"compatibilityLevel": registry.compatibility(subject, _flag(request, "defaultToGlobal"))})

    def put_config(request: Request, document: Any) -> Response:
        level = document.get("compatibility") if isinstance(document, dict) else None
        return _answer({"compatibility": registry.set_compatibility(request.path_params.get("subject"), level)})

    def delete_config(request: Request, document: Any) -> Response:
        return _answer({"compatibilityLevel": registry.delete_compatibility(request.path_params.get("subject"))})

    def get_mode(request: Request) -> Response:
        subject = request.path_params.get("subject")
        return _answer({"mode": registry.mode(subject, _flag(request, "defaultToGlobal"))})

    def put_mode(request: Request, document: Any) -> Response:
        mode = document.get("mode") if isinstance(document, dict) else None
        return _answer({"mode": registry.set_mode(request.path_params.get("subject"), mode)})

    def delete_mode(request: Request, document: Any) -> Response:
        return _answer({"mode": registry.delete_mode(request.path_params["subject"])})

    routes = [
        Route("/", read(root), methods=["GET"]),
        Route("/subjects", read(list_subjects), methods=["GET"]),
        # A lookup changes nothing: any instance answers it, as it does a compatibility test.
        Route("/subjects/{subject}", _local(lookup), methods=["POST"]),
        Route("/subjects/{subject}", write(delete_subject), methods=["DELETE"]),
        Route("/subjects/{subject}/versions", read(list_versions), methods=["GET"]),
        Route("/subjects/{subject}/versions", write(register), methods=["POST"]),
        Route("/subjects/{subject}/versions/{version}", read(get_version), methods=["GET"]),
        Route("/subjects/{subject}/versions/{version}", write(delete_version), methods=["DELETE"]),
        Route("/subjects/{subject}/versions/{version}/schema", read(get_version_schema), methods=["GET"]),
        Route("/subjects/{subject}/versions/{version}/referencedby", read(referenced_by), methods=["GET"]),
        Route("/schemas/types", read(schema_types), methods=["GET"]),
        Route("/contexts", read(contexts), methods=["GET"]),
        Route("/schemas/ids/{id}", read(schema_by_id), methods=["GET"]),
        Route("/schemas/ids/{id}/schema", read(schema_by_id_text), methods=["GET"]),
        Route("/schemas/ids/{id}/subjects", read(schema_subjects), methods=["GET"]),
        Route("/schemas/ids/{id}/versions", read(schema_versions), methods=["GET"]),
        Route("/compatibility/subjects/{subject}/versions/{version}", _local(compatibility), methods=["POST"]),
        Route("/compatibility/subjects/{subject}/versions", _local(compatibility), methods=["POST"]),
        Route("/config", read(get_config), methods=["GET"]),
        Route("/config", write(put_config), methods=["PUT"]),
        Route("/config", write(delete_config), methods=["DELETE"]),
        Route("/config/{subject}", read(get_config), methods=["GET"]),
        Route("/config/{subject}", write(put_config), methods=["PUT"]),
        Route("/config/{subject}", write(delete_config), methods=["DELETE"]),
        Route("/mode", read(get_mode), methods=["GET"]),
        Route("/mode", write(put_mode), methods=["PUT"]),
        Route("/mode/{subject}", read(get_mode), methods=["GET"]),
        Route("/mode/{subject}", write(put_mode), methods=["PUT"]),
        Route("/mode/{subject}", write(delete_mode), methods=["DELETE"]),
    ]

    async def registry_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, RegistryError)
        return _answer(error.to_json(), error.status)

    async def http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        return _answer({"error_code": error.status_code, "message": f"HTTP {error.status_code} {error.detail}"},
                       error.status_code)

    app = Starlette(routes=routes, exception_handlers={RegistryError: registry_error, HTTPException: http_error})

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/contexts/"):
            rewritten = context_path(scope["path"], scope.get("query_string", b"").decode("latin-1"))
            if rewritten is not None:
                path, query = rewritten
                scope = {**scope, "path": path, "raw_path": path.encode(), "query_string": query.encode("latin-1")}
        await app(scope, receive, send)
    return application


def context_path(path: str, query: str) -> tuple[str, str] | None:
    """A request under the base path ``/contexts/{context}`` as the request it stands for: subjects qualified with
    the context (``/subjects/s`` -> ``/subjects/:.ctx:s``; the subject list, config and mode of the context itself
    at ``:.ctx:``), schema ids looked up in the context (``?subject=:.ctx:``). None when ``path`` is not under a
    context's base path."""
    from urllib.parse import parse_qsl, quote, unquote, urlencode

    parts = path.split("/")  # "", "contexts", context, resource, ...
    if len(parts) < 4 or not parts[2].startswith("."):
        return None
    context, resource, rest = unquote(parts[2]), parts[3], parts[4:]
    params = parse_qsl(query, keep_blank_values=True)

    def qualified(subject: str) -> str:
        return quote(f":{context}:{unquote(subject)}", safe=":")
    if resource == "subjects" and not rest:
        params = [(key, value) for key, value in params if key != "subjectPrefix"]
        params.append(("subjectPrefix", f":{context}:" + dict(parse_qsl(query)).get("subjectPrefix", "")))
    elif resource == "subjects" or (resource == "compatibility" and rest[:1] == ["subjects"] and len(rest) > 1):
        at = 0 if resource == "subjects" else 1
        rest = rest[:at] + [qualified(rest[at])] + rest[at + 1:]
    elif resource in ("config", "mode"):
        rest = [qualified(rest[0] if rest else "")] + rest[1:]
    elif resource == "schemas":
        subject = dict(params).get("subject", "")
        params = [(key, value) for key, value in params if key != "subject"] + [("subject", f":{context}:{subject}")]
    return "/".join(["", resource, *rest]), urlencode(params)


def _local(handler: Callable[[Request, Any], Response]) -> Callable:
    """A POST answered by this instance, whatever its role."""
    async def endpoint(request: Request) -> Response:
        raw = await request.body()
        try:
            document = json.loads(raw) if raw else {}
        except ValueError:
            raise invalid_schema("the request body is not JSON") from None
        return await _in_thread(handler, request, document)
    return endpoint


def _schema_id(request: Request) -> int:
    try:
        return int(request.path_params["id"])
    except ValueError:
        raise HTTPException(404, "Not Found") from None


async def _in_thread(function: Callable, *args: Any) -> Any:
    from starlette.concurrency import run_in_threadpool
    return await run_in_threadpool(function, *args)
