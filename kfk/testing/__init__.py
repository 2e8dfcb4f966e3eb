"""Test helpers for projects that use Kafka: real kfk brokers in subprocesses, as pytest fixtures.

`pip install kfk` registers the pytest plugin (kfk.testing.plugin); a test then asks for `kfk_broker` and gets the
bootstrap address of a fresh single-node broker on an ephemeral port with its own temporary log dir. No JVM, no
Docker.
"""

from kfk.testing.broker import BrokerProcess, start_broker

__all__ = ["BrokerProcess", "start_broker"]
