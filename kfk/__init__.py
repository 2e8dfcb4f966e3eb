"""kfk: Apache Kafka rebuilt in Python.

A broker that speaks Kafka's wire protocol and stores data in Kafka's on-disk format, a client library and one CLI.
"""

__version__ = "0.1.0"
#: The Kafka release whose protocol kfk speaks: the message schemas are Apache Kafka 4.4.0's
#: (scripts/kafka-protocol/README.md) and ApiVersions advertises that release's highest versions.
KAFKA_PROTOCOL = "4.4"
