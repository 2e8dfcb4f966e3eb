"""kfk: Apache Kafka rebuilt in Python.

A broker that speaks Kafka's wire protocol and stores data in Kafka's on-disk format, a client library and one CLI.
"""

__version__ = "0.1.0"
