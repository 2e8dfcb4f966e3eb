"""The Kafka wire protocol, sans I/O: bytes in, messages out.

primitives.py holds the wire types, messages/ the codec generated from Kafka's JSON schemas (loaded per API on first
use), headers.py the request/response headers and framing, apis.py the API keys and version ranges.
"""
