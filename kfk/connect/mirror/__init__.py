"""MirrorMaker 2 on kfk.connect: Kafka's MirrorSourceConnector, MirrorCheckpointConnector and
MirrorHeartbeatConnector (org.apache.kafka.connect.mirror), their record formats, and the dedicated-mode driver."""
