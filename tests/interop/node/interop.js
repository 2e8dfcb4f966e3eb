// kafkajs (a Kafka client written in JavaScript, no librdkafka) against a broker, for kfk's interoperability tests.
// Each command does one thing and prints one JSON document on stdout; the Python tests assert on it and cross-check
// the broker with confluent-kafka. kafkajs's own log lines go to stderr; a failure prints one line there, exit 1.
//
//   node interop.js produce BROKERS TOPIC COUNT PARTITIONS CODEC
//   node interop.js group   BROKERS TOPIC GROUP COUNT
'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

function client (brokers) {
  return new Kafka({
    clientId: 'kfk-interop-kafkajs',
    brokers: brokers.split(','),
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, label, log }) =>
      process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`)
  })
}

// Record i: key-i / kafkajs-value-i, headers index=i and client=kafkajs, partition i % partitions; one send()
// so that each partition's records go in one batch and the offsets follow from the batch's base offset.
async function produce (brokers, topic, count, partitions, codec) {
  if (!(codec in CODECS)) throw new Error(`unknown codec ${codec}`)
  const producer = client(brokers).producer()
  await producer.connect()
  try {
    const messages = []
    for (let i = 0; i < count; i++) {
      messages.push({
        partition: i % partitions,
        key: `key-${i}`,
        value: `kafkajs-value-${i}`,
        headers: { index: String(i), client: 'kafkajs' }
      })
    }
    const results = await producer.send({ topic, acks: -1, compression: CODECS[codec], messages })
    const baseOffsets = {}
    for (const result of results) {
      if (result.errorCode !== 0) throw new Error(`partition ${result.partition}: error ${result.errorCode}`)
      baseOffsets[result.partition] = BigInt(result.baseOffset)
    }
    const position = {}
    return messages.map((message) => {
      const index = position[message.partition] || 0n
      position[message.partition] = index + 1n
      return {
        partition: message.partition,
        offset: Number(baseOffsets[message.partition] + index),
        key: message.key,
        value: message.value,
        headers: message.headers
      }
    })
  } finally {
    await producer.disconnect()
  }
}

// One group member reads `count` records from the beginning and commits each record's next offset itself
// (autoCommit off), then leaves the group.
async function group (brokers, topic, groupId, count) {
  const consumer = client(brokers).consumer({ groupId })
  await consumer.connect()
  const records = []
  let finish
  let fail
  const finished = new Promise((resolve, reject) => { finish = resolve; fail = reject })
  const timer = setTimeout(() => fail(new Error(`consumed ${records.length} of ${count} in 60 s`)), 60000)
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        const headers = {}
        for (const [name, value] of Object.entries(message.headers || {})) headers[name] = value.toString()
        records.push({
          partition,
          offset: Number(message.offset),
          key: message.key.toString(),
          value: message.value.toString(),
          headers
        })
        const next = (BigInt(message.offset) + 1n).toString()
        await consumer.commitOffsets([{ topic, partition, offset: next }])
        if (records.length >= count) finish()
      }
    })
    await finished
  } finally {
    clearTimeout(timer)
    await consumer.disconnect()
  }
  return records
}

async function main (argv) {
  const [command, ...args] = argv
  if (command === 'produce') {
    const [brokers, topic, count, partitions, codec] = args
    return produce(brokers, topic, Number(count), Number(partitions), codec)
  }
  if (command === 'group') {
    const [brokers, topic, groupId, count] = args
    return group(brokers, topic, groupId, Number(count))
  }
  throw new Error(`unknown command ${command}: produce or group`)
}

main(process.argv.slice(2)).then(
  (result) => { process.stdout.write(JSON.stringify(result) + '\n') },
  (error) => {
    process.stderr.write(`interop.js: ${error.message}\n`)
    process.exitCode = 1
  }
)
