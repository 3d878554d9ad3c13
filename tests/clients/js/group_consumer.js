// One consumer-group member (kafkajs 2.2.4) for the group tests; line protocol of
// java/GroupConsumer.java: A p,.. (whole assignment after each join) / R p o / C p o / CF msg /
// STARTED / CLOSED.
// Args: bootstrap topic group sessionTimeoutMs stopFile batchDelayMs maxBytesPerPartition
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')
// process.exit() does not wait for a piped stdout to drain, and output past the pipe buffer
// would be lost: exit from the callback of an empty write, which runs after earlier writes.
const exitAfterFlush = (code) => process.stdout.write('', () => process.exit(code));

const [bootstrap, topic, groupId, session, stopFile, delay, maxBytes] = process.argv.slice(2)
const out = (s) => process.stdout.write(s + '\n')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function main () {
  const kafka = new Kafka({
    clientId: 'group-consumer-js',
    brokers: bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 200, maxRetryTime: 1000, retries: 100 }
  })
  const consumer = kafka.consumer({
    groupId,
    sessionTimeout: Number(session),
    heartbeatInterval: 500,
    rebalanceTimeout: 30000,
    maxBytesPerPartition: Number(maxBytes),
    retry: { initialRetryTime: 200, maxRetryTime: 1000, retries: 100 }
  })
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const ps = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
    out('A ' + ps.join(','))
  })
  consumer.on(consumer.events.CRASH, (e) => out('CRASH ' + (e.payload.error && e.payload.error.message)))
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, isRunning, isStale, resolveOffset }) => {
      let last = null
      for (const m of batch.messages) {
        if (!isRunning() || isStale()) break
        out(`R ${batch.partition} ${m.offset}`)
        resolveOffset(m.offset)
        last = Number(m.offset)
      }
      if (last === null) return
      try {
        await consumer.commitOffsets([{ topic, partition: batch.partition, offset: String(last + 1) }])
        out(`C ${batch.partition} ${last + 1}`)
      } catch (e) {
        out(`CF ${e.name}: ${e.message}`)
      }
      if (Number(delay) > 0) await sleep(Number(delay))
    }
  })
  out('STARTED')
  while (!fs.existsSync(stopFile)) await sleep(100)
  await consumer.disconnect()
  out('CLOSED')
  exitAfterFlush(0)
}

main().catch((e) => {
  out('FATAL ' + e.message)
  exitAfterFlush(1)
})
