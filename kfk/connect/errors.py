"""Connect's exceptions (org.apache.kafka.connect.errors), by Kafka's names, so plugins raise what Kafka's do."""


class ConnectException(Exception):
    """The base of Connect's errors: a task or connector raising it is FAILED."""


class DataException(ConnectException):
    """Data does not fit its schema, or a converter cannot read or write it."""


class RetriableException(ConnectException):
    """A transient failure: the framework retries the operation (put, poll) instead of failing the task."""


class NotFoundException(ConnectException):
    """A connector, task or plugin the request names does not exist (REST 404)."""


class AlreadyExistsException(ConnectException):
    """A connector of that name exists already (REST 409)."""


class BadRequestException(ConnectException):
    """The request is malformed or its values are invalid (REST 400)."""


class RebalanceNeededException(ConnectException):
    """A distributed worker is rebalancing and cannot serve a write now (REST 409, as Kafka answers)."""
