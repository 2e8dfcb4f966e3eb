"""The embedded metadata backend: a KRaft-style __cluster_metadata log on this node (single voter for now)."""

from kfk.backends.embedded.backend import EmbeddedMetadataBackend

__all__ = ["EmbeddedMetadataBackend"]
