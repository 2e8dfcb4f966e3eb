"""`kfk ui`: a web console for any Kafka cluster (overview with Kafka Manager's statistics, topics, messages, consumer
groups, preferred-replica election, reassignment), talking to the cluster through kfk's client library only."""
