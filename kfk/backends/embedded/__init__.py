"""The embedded metadata backend: the __cluster_metadata log, replicated by a Raft quorum of the controllers
(KRaft; a single-node default is a quorum of one)."""

from kfk.backends.embedded.backend import EmbeddedMetadataBackend

__all__ = ["EmbeddedMetadataBackend"]
