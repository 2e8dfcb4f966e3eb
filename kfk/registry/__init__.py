"""kfk's schema registry: a service speaking Confluent Schema Registry's REST API whose state lives in the compacted
``_schemas`` topic of any Kafka cluster (it talks to the cluster through kfk's client library only), and the serdes
that frame records in Confluent's wire format (magic byte 0, the 4-byte schema id, the payload) for Avro, JSON Schema
and Protobuf, used by kfk's console tools.
"""
