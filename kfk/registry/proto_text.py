"""Protobuf schemas as .proto source text, Confluent's canonical form for them, both ways: text to a
FileDescriptorProto (what Protobuf's runtime links and the serializers exchange as base64), and a FileDescriptorProto
back to text (a schema registered as a descriptor is stored and answered as text, as Confluent's registry does).

The text is parsed by ``proto_schema_parser`` (a pure-Python parser built from Buf's ANTLR grammar) into its syntax
tree; this module does what protoc does after parsing and the library does not: resolve type names by Protobuf's
scoping rules, turn map fields into their nested entry messages, proto3 ``optional`` into synthetic oneofs, and
options into the descriptor's option messages. The canonical text is the library's rendering of the tree without
comments. Type names in text made from a descriptor are fully qualified with a leading dot, as Confluent writes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool
from proto_schema_parser import ast
from proto_schema_parser.generator import Generator

from kfk.registry.schema_types import SchemaParseError

__all__ = ["parse_source", "render", "descriptor_from_source", "source_from_descriptor"]

F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {name.removeprefix("TYPE_").lower(): number for name, number in F.Type.items()
            if name not in ("TYPE_MESSAGE", "TYPE_ENUM", "TYPE_GROUP")}
_SCALAR_NAMES = {number: name for name, number in _SCALARS.items()}
_CARDINALITY_LABELS = {ast.FieldCardinality.REQUIRED: F.LABEL_REQUIRED, ast.FieldCardinality.REPEATED:
                       F.LABEL_REPEATED}
_MAX_FIELD_NUMBER = 2**29 - 1
_MAX_ENUM_NUMBER = 2**31 - 1


def parse_source(text: str) -> ast.File:
    """The syntax tree of .proto text; a syntax error is a SchemaParseError naming its line and column (the parser
    would otherwise print it and recover)."""
    from antlr4.error.ErrorListener import ErrorListener
    from proto_schema_parser.parser import Parser

    class Refuse(ErrorListener):
        def syntaxError(self, recognizer, offending_symbol, line, column, message, error):
            raise SchemaParseError(f"line {line}:{column} {message}")

    def listen(recognizer) -> None:
        recognizer.removeErrorListeners()
        recognizer.addErrorListener(Refuse())

    return _unescaped(Parser(setup_lexer=listen, setup_parser=listen).parse(text))


def _unescaped(node: Any) -> Any:
    """The tree with its string values unescaped (the parser keeps them as written, the generator escapes them)."""
    import codecs

    if isinstance(node, str):
        try:
            return codecs.escape_decode(node.encode())[0].decode()
        except (ValueError, UnicodeDecodeError):
            raise SchemaParseError(f"invalid string literal \"{node}\"") from None
    if isinstance(node, list):
        return [_unescaped(item) for item in node]
    if isinstance(node, (ast.Option, ast.MessageLiteralField)):
        node.value = _unescaped(node.value)
    elif isinstance(node, ast.MessageLiteral):
        node.elements = _unescaped(node.elements)
    for name in ("file_elements", "elements", "options"):
        if isinstance(getattr(node, name, None), list):
            setattr(node, name, _unescaped(getattr(node, name)))
    return node


def render(file: ast.File) -> str:
    """The canonical text: the tree rendered without its comments."""
    return _Renderer().generate(_without_comments(file))


class _Renderer(Generator):
    """The library's generator, but for what it renders short: a file-level option's value as a value (not always
    quoted), a map field's options, a group's cardinality."""

    def generate(self, file: ast.File) -> str:
        options = [element for element in file.file_elements if isinstance(element, ast.Option)]
        rest = ast.File(file.syntax, file.edition, [element for element in file.file_elements
                                                    if not isinstance(element, ast.Option)])
        lines = super().generate(rest).split("\n")
        at = next((index for index, line in enumerate(lines) if not line.startswith(("syntax ", "package ",
                                                                                        "import "))), len(lines))
        return "\n".join(lines[:at] + [self._generate_option(option) for option in options] + lines[at:])

    def _generate_map_field(self, map_field: ast.MapField, indent_level: int = 0) -> str:
        indent = "  " * indent_level
        field = self._generate_field(ast.Field(map_field.name, map_field.number, "", None, map_field.options),
                                     indent_level)  # "{indent} name = number [options];"
        return f"{indent}map<{map_field.key_type}, {map_field.value_type}>{field[len(indent):]}"

    def _generate_group(self, group: ast.Group, indent_level: int = 0) -> str:
        text = super()._generate_group(group, indent_level)
        if group.cardinality:
            indent = "  " * indent_level
            text = f"{indent}{group.cardinality.value.lower()} {text.removeprefix(indent)}"
        return text


def _without_comments(node: Any) -> Any:
    if isinstance(node, list):
        return [_without_comments(item) for item in node if not isinstance(item, ast.Comment)]
    for name in ("file_elements", "elements"):
        if isinstance(getattr(node, name, None), list):
            setattr(node, name, _without_comments(getattr(node, name)))
    return node


# --- text to descriptor ----------------------------------------------------------------------------------------------

def descriptor_from_source(file: ast.File, name: str,
                           pool: descriptor_pool.DescriptorPool) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto protoc would write for ``file``; names of imported types are looked up in ``pool``
    (which holds the imports), names of the file's own types in the file."""
    if file.edition:
        raise SchemaParseError(f"edition {file.edition} is not supported: give a proto2 or proto3 schema")
    proto = descriptor_pb2.FileDescriptorProto(name=name)
    if file.syntax == "proto3":
        proto.syntax = "proto3"
    elif file.syntax not in (None, "proto2"):
        raise SchemaParseError(f"unknown syntax {file.syntax!r} (proto2 or proto3)")
    for element in file.file_elements:
        if isinstance(element, ast.Package):
            proto.package = element.name
    builder = _Builder(proto, pool)
    for element in file.file_elements:
        if isinstance(element, ast.Import):
            if element.public:
                proto.public_dependency.append(len(proto.dependency))
            if element.weak:
                proto.weak_dependency.append(len(proto.dependency))
            proto.dependency.append(element.name)
        elif isinstance(element, ast.Option):
            _set_option(proto.options, element)
        elif isinstance(element, ast.Message):
            builder.message(proto.message_type.add(), element, proto.package)
        elif isinstance(element, ast.Enum):
            builder.enum(proto.enum_type.add(), element)
        elif isinstance(element, ast.Extension):
            builder.extension(proto.extension, element, proto.package)
        elif isinstance(element, ast.Service):
            builder.service(proto.service.add(), element, proto.package)
    builder.resolve_all()
    return proto


class _Builder:
    def __init__(self, proto: descriptor_pb2.FileDescriptorProto, pool: descriptor_pool.DescriptorPool) -> None:
        self.proto = proto
        self.pool = pool
        self.own: dict[str, int] = {}  # full name (no leading dot) -> TYPE_MESSAGE or TYPE_ENUM
        self.unresolved: list[tuple[Any, str, str, str]] = []  # (descriptor, attribute, written name, scope)

    def _full(self, scope: str, name: str) -> str:
        return f"{scope}.{name}" if scope else name

    def message(self, message: descriptor_pb2.DescriptorProto, node: ast.Message | ast.Group, scope: str) -> None:
        message.name = node.name
        full = self._full(scope, node.name)
        self.own[full] = F.TYPE_MESSAGE
        for element in node.elements:
            if isinstance(element, ast.Field):
                self.field(message.field.add(), element, full)
            elif isinstance(element, ast.MapField):
                self.map_field(message, element, full)
            elif isinstance(element, ast.Group):
                self.group(message, element, full)
            elif isinstance(element, ast.OneOf):
                index = len(message.oneof_decl)
                oneof = message.oneof_decl.add(name=element.name)
                for member in element.elements:
                    if isinstance(member, ast.Field):
                        self.field(message.field.add(oneof_index=index), member, full)
                    elif isinstance(member, ast.Group):
                        self.group(message, member, full).oneof_index = index
                    elif isinstance(member, ast.Option):
                        _set_option(oneof.options, member)
            elif isinstance(element, ast.Message):
                self.message(message.nested_type.add(), element, full)
            elif isinstance(element, ast.Enum):
                self.enum(message.enum_type.add(), element, full)
            elif isinstance(element, ast.Extension):
                self.extension(message.extension, element, full)
            elif isinstance(element, ast.Option):
                _set_option(message.options, element)
            elif isinstance(element, ast.Reserved):
                for text in element.ranges:
                    start, end = _range(text, _MAX_FIELD_NUMBER)
                    message.reserved_range.add(start=start, end=end + 1)
                message.reserved_name.extend(element.names)
            elif isinstance(element, ast.ExtensionRange):
                for text in element.ranges:
                    start, end = _range(text, _MAX_FIELD_NUMBER)
                    message.extension_range.add(start=start, end=end + 1)
        # proto3 optional fields each get a oneof of their own, after the declared ones (as protoc orders them)
        for field in message.field:
            if field.proto3_optional:
                field.oneof_index = len(message.oneof_decl)
                name = f"_{field.name}"
                while any(oneof.name == name for oneof in message.oneof_decl):
                    name = f"X{name}"
                message.oneof_decl.add(name=name)

    def field(self, field: descriptor_pb2.FieldDescriptorProto, node: ast.Field, scope: str) -> None:
        field.name, field.number = node.name, node.number
        field.label = _CARDINALITY_LABELS.get(node.cardinality, F.LABEL_OPTIONAL)
        if node.cardinality == ast.FieldCardinality.OPTIONAL and self.proto.syntax == "proto3" and \
                not field.HasField("oneof_index"):
            field.proto3_optional = True
        self._type(field, node.type, scope)
        for option in node.options:
            if option.name == "default":
                field.default_value = _option_text(option.value)
            elif option.name == "json_name":
                field.json_name = str(option.value)
            else:
                _set_option(field.options, option)

    def _type(self, field: descriptor_pb2.FieldDescriptorProto, written: str, scope: str) -> None:
        if written in _SCALARS:
            field.type = _SCALARS[written]
        else:
            self.unresolved.append((field, "type_name", written, scope))

    def map_field(self, message: descriptor_pb2.DescriptorProto, node: ast.MapField, scope: str) -> None:
        entry_name = "".join(part[:1].upper() + part[1:] for part in node.name.split("_")) + "Entry"
        entry = message.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        self.own[self._full(scope, entry_name)] = F.TYPE_MESSAGE
        entry_scope = self._full(scope, entry_name)
        self._type(entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL), node.key_type, entry_scope)
        self._type(entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL), node.value_type, entry_scope)
        field = message.field.add(name=node.name, number=node.number, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                                  type_name=f".{self._full(scope, entry_name)}")
        for option in node.options:
            _set_option(field.options, option)

    def group(self, message: descriptor_pb2.DescriptorProto, node: ast.Group,
              scope: str) -> descriptor_pb2.FieldDescriptorProto:
        self.message(message.nested_type.add(), node, scope)
        return message.field.add(name=node.name.lower(), number=node.number, type=F.TYPE_GROUP,
                                 label=_CARDINALITY_LABELS.get(node.cardinality, F.LABEL_OPTIONAL),
                                 type_name=f".{self._full(scope, node.name)}")

    def enum(self, enum: descriptor_pb2.EnumDescriptorProto, node: ast.Enum, scope: str = "") -> None:
        enum.name = node.name
        full = self._full(scope or self.proto.package, node.name)
        self.own[full] = F.TYPE_ENUM
        for element in node.elements:
            if isinstance(element, ast.EnumValue):
                value = enum.value.add(name=element.name, number=element.number)
                for option in element.options:
                    _set_option(value.options, option)
            elif isinstance(element, ast.Option):
                _set_option(enum.options, element)
            elif isinstance(element, ast.EnumReserved):
                for text in element.ranges:
                    start, end = _range(text, _MAX_ENUM_NUMBER)
                    enum.reserved_range.add(start=start, end=end)  # inclusive, unlike a message's
                enum.reserved_name.extend(element.names)

    def extension(self, fields, node: ast.Extension, scope: str) -> None:
        for element in node.elements:
            if isinstance(element, ast.Field):
                field = fields.add()
                self.field(field, element, scope)
                self.unresolved.append((field, "extendee", node.typeName, scope))

    def service(self, service: descriptor_pb2.ServiceDescriptorProto, node: ast.Service, scope: str) -> None:
        service.name = node.name
        for element in node.elements:
            if isinstance(element, ast.Method):
                method = service.method.add(name=element.name)
                if element.input_type.stream:
                    method.client_streaming = True
                if element.output_type.stream:
                    method.server_streaming = True
                self.unresolved.append((method, "input_type", element.input_type.type, scope))
                self.unresolved.append((method, "output_type", element.output_type.type, scope))
                for option in element.elements:
                    if isinstance(option, ast.Option):
                        _set_option(method.options, option)
            elif isinstance(element, ast.Option):
                _set_option(service.options, element)

    def kind(self, full: str) -> int | None:
        if full in self.own:
            return self.own[full]
        try:
            self.pool.FindMessageTypeByName(full)
            return F.TYPE_MESSAGE
        except KeyError:
            pass
        try:
            self.pool.FindEnumTypeByName(full)
            return F.TYPE_ENUM
        except KeyError:
            return None

    def resolve(self, written: str, scope: str) -> tuple[str, int]:
        """Protobuf's scoping: a relative name is looked up in the enclosing scope, then each outer one."""
        if written.startswith("."):
            candidates: Iterable[str] = [written[1:]]
        else:
            parts = scope.split(".") if scope else []
            candidates = [".".join([*parts[:length], written]) for length in range(len(parts), -1, -1)]
        for candidate in candidates:
            kind = self.kind(candidate)
            if kind is not None:
                return f".{candidate}", kind
        raise SchemaParseError(f"the type {written} (in {scope or 'the file'}) is not defined: import the file "
                               "that defines it (and give that file as a reference)")

    def resolve_all(self) -> None:
        for descriptor, attribute, written, scope in self.unresolved:
            full, kind = self.resolve(written, scope)
            setattr(descriptor, attribute, full)
            if attribute == "type_name":
                descriptor.type = kind
            elif attribute in ("input_type", "output_type", "extendee") and kind != F.TYPE_MESSAGE:
                raise SchemaParseError(f"{written} is not a message type")


def _range(text: str, maximum: int) -> tuple[int, int]:
    """'5', '5 to 9' or '5 to max' (both ends inclusive)."""
    start, _, end = (part.strip() for part in text.partition(" to "))
    try:
        return int(start, 0), maximum if end == "max" else int(end or start, 0)
    except ValueError:
        raise SchemaParseError(f"not a range: {text}") from None


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, ast.Identifier):
        return value.name
    return str(value)


def _set_option(options: Any, option: ast.Option) -> None:
    """Set one of the option message's own fields; a custom option ``(name)`` is kept in the text only (its
    definition would have to be linked to give it a field number)."""
    if option.name.startswith("("):
        return
    field = options.DESCRIPTOR.fields_by_name.get(option.name)
    if field is None:
        raise SchemaParseError(f"unknown option {option.name} of {options.DESCRIPTOR.name}")
    value = option.value
    try:
        if field.enum_type is not None:
            value = field.enum_type.values_by_name[_option_text(value)].number
        elif field.type == field.TYPE_BOOL and isinstance(value, str):
            value = {"true": True, "false": False}[value]
        setattr(options, option.name, value)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise SchemaParseError(f"invalid value {_option_text(option.value)} of option {option.name}") from None


# --- descriptor to text ----------------------------------------------------------------------------------------------

def source_from_descriptor(proto: descriptor_pb2.FileDescriptorProto) -> ast.File:
    """The syntax tree of the text that declares ``proto``."""
    elements: list[Any] = []
    if proto.package:
        elements.append(ast.Package(proto.package))
    for index, dependency in enumerate(proto.dependency):
        elements.append(ast.Import(dependency, weak=index in proto.weak_dependency,
                                   public=index in proto.public_dependency))
    elements += _options(proto.options)
    proto3 = proto.syntax == "proto3"
    elements += [_message(message, proto3) for message in proto.message_type]
    elements += [_enum(enum) for enum in proto.enum_type]
    elements += _extensions(proto.extension, proto3)
    for service in proto.service:
        methods: list[Any] = _options(service.options)
        for method in service.method:
            methods.append(ast.Method(method.name, ast.MessageType(method.input_type, method.client_streaming),
                                      ast.MessageType(method.output_type, method.server_streaming),
                                      _options(method.options)))
        elements.append(ast.Service(service.name, methods))
    return ast.File(syntax=proto.syntax if proto.syntax in ("proto2", "proto3") else "proto2",
                    file_elements=elements)


def _options(options: Any) -> list[ast.Option]:
    found = []
    for field, value in options.ListFields():
        if field.name in ("map_entry", "uninterpreted_option") or field.is_extension:
            continue
        if field.enum_type is not None:
            value = ast.Identifier(field.enum_type.values_by_number[value].name)
        found.append(ast.Option(field.name, value))
    return found


def _field(field: descriptor_pb2.FieldDescriptorProto, proto3: bool) -> ast.Field:
    if field.label == F.LABEL_REPEATED:
        cardinality = ast.FieldCardinality.REPEATED
    elif field.label == F.LABEL_REQUIRED:
        cardinality = ast.FieldCardinality.REQUIRED
    elif field.proto3_optional or (not proto3 and not field.HasField("oneof_index")):
        cardinality = ast.FieldCardinality.OPTIONAL
    else:
        cardinality = None
    options = _options(field.options)
    if field.HasField("default_value"):
        default: Any = field.default_value
        if field.type == F.TYPE_ENUM or default in ("inf", "-inf", "nan"):
            default = ast.Identifier(default)
        elif field.type == F.TYPE_BOOL:
            default = default == "true"
        elif field.type not in (F.TYPE_STRING, F.TYPE_BYTES):
            default = float(default) if any(char in default for char in ".eE") else int(default)
        options.insert(0, ast.Option("default", default))
    if field.json_name and field.json_name != _json_name(field.name):
        options.append(ast.Option("json_name", field.json_name))
    return ast.Field(field.name, field.number, _SCALAR_NAMES.get(field.type, field.type_name), cardinality, options)


def _json_name(name: str) -> str:
    """protoc's default JSON name: lowerCamelCase of the field name."""
    parts = name.split("_")
    return parts[0] + "".join(part[:1].upper() + part[1:] for part in parts[1:])


def _message(message: descriptor_pb2.DescriptorProto, proto3: bool, name: str | None = None) -> ast.Message:
    entries = {nested.name: nested for nested in message.nested_type if nested.options.map_entry}
    groups = {field.type_name.rsplit(".", 1)[-1] for field in message.field if field.type == F.TYPE_GROUP}
    elements: list[Any] = _options(message.options)
    oneofs: dict[int, ast.OneOf] = {}
    for field in message.field:
        entry = entries.get(field.type_name.rsplit(".", 1)[-1]) if field.label == F.LABEL_REPEATED else None
        if entry is not None and field.type == F.TYPE_MESSAGE:
            key, value = entry.field[0], entry.field[1]
            element: Any = ast.MapField(field.name, field.number, _SCALAR_NAMES.get(key.type, key.type_name),
                                        _SCALAR_NAMES.get(value.type, value.type_name), _options(field.options))
        elif field.type == F.TYPE_GROUP:
            nested = next(nested for nested in message.nested_type
                          if nested.name == field.type_name.rsplit(".", 1)[-1])
            group = _message(nested, proto3)
            element = ast.Group(nested.name, field.number, _field(field, proto3).cardinality, group.elements)
        else:
            element = _field(field, proto3)
        if field.HasField("oneof_index") and not field.proto3_optional:
            if field.oneof_index not in oneofs:
                declaration = message.oneof_decl[field.oneof_index]
                oneofs[field.oneof_index] = ast.OneOf(declaration.name, _options(declaration.options))
                elements.append(oneofs[field.oneof_index])
            if isinstance(element, ast.Field):
                element.cardinality = None
            oneofs[field.oneof_index].elements.append(element)
        else:
            elements.append(element)
    for nested in message.nested_type:
        if nested.name not in entries and nested.name not in groups:
            elements.append(_message(nested, proto3))
    elements += [_enum(enum) for enum in message.enum_type]
    elements += _extensions(message.extension, proto3)
    for reserved in message.reserved_range:
        elements.append(ast.Reserved(ranges=[_range_text(reserved.start, reserved.end - 1, _MAX_FIELD_NUMBER)]))
    if message.reserved_name:
        elements.append(ast.Reserved(names=list(message.reserved_name)))
    for extensions in message.extension_range:
        elements.append(ast.ExtensionRange([_range_text(extensions.start, extensions.end - 1, _MAX_FIELD_NUMBER)]))
    return ast.Message(name or message.name, elements)


def _range_text(start: int, end: int, maximum: int) -> str:
    if start == end:
        return str(start)
    return f"{start} to {'max' if end >= maximum else end}"


def _enum(enum: descriptor_pb2.EnumDescriptorProto) -> ast.Enum:
    elements: list[Any] = _options(enum.options)
    elements += [ast.EnumValue(value.name, value.number, _options(value.options)) for value in enum.value]
    for reserved in enum.reserved_range:
        elements.append(ast.EnumReserved(ranges=[_range_text(reserved.start, reserved.end, _MAX_ENUM_NUMBER)]))
    if enum.reserved_name:
        elements.append(ast.EnumReserved(names=list(enum.reserved_name)))
    return ast.Enum(enum.name, elements)


def _extensions(fields: Iterable[descriptor_pb2.FieldDescriptorProto], proto3: bool) -> list[ast.Extension]:
    by_extendee: dict[str, ast.Extension] = {}
    for field in fields:
        extension = by_extendee.setdefault(field.extendee, ast.Extension(field.extendee))
        extension.elements.append(_field(field, proto3))
    return list(by_extendee.values())
