"""kfk's client for asyncio code, in the shape aiokafka users know: AIOProducer, AIOConsumer, AIOAdmin; and
AIOShareConsumer, a share group member.

    from kfk.client.aio import AIOProducer, AIOConsumer, AIOAdmin, AIOShareConsumer

They share the sync client's core (the accumulator and sender, the fetcher and group coordinator, the admin calls,
kfk.protocol's sans-I/O connection) and run its network side on the caller's event loop instead of a thread.
"""

from kfk.client.aio.admin import AIOAdmin
from kfk.client.aio.consumer import AIOConsumer
from kfk.client.aio.producer import AIOProducer, RecordFuture
from kfk.client.aio.share_consumer import AIOShareConsumer

__all__ = ["AIOAdmin", "AIOConsumer", "AIOProducer", "AIOShareConsumer", "RecordFuture"]
