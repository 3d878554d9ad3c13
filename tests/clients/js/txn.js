// Transactions with the stock kafkajs 2.2.4 producer (its transaction API sends v0-1 of
// InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn).
//
//   txn <bootstrap> <topic> <partitions> <transactional-id> <group> <input-topic> <records-per-txn>
//       Three transactions on one producer, each sending <records-per-txn> records (value
//       "<tag>-<i>", record i to partition i % partitions) and committing an offset of partition 0
//       of <input-topic> for <group> with sendOffsets:
//         tag c1, offset 5, committed; tag c2, offset 7, committed; tag a3, offset 9, aborted
//       (so the group's offset must end at 7 and no a3 record may be read_committed).
//       Prints "committed c1", "committed c2", "aborted a3", then txn.done=true.
//   fenced <bootstrap> <topic> <transactional-id> <go-file>
//       Begins a transaction, sends one record "z-old", prints "open" and waits until <go-file>
//       exists; then tries to send "z-late" and commit, printing "fenced <error type>" when
//       refused (or "commit.ok" when not), and exits.
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const exitAfterFlush = (code) => process.stdout.write('', () => process.exit(code));
const out = (line) => process.stdout.write(line + '\n');

const [mode, bootstrap, ...rest] = process.argv.slice(2);

const kafka = new Kafka({
  clientId: 'groupcoord-kafkajs-txn',
  brokers: [bootstrap],
  connectionTimeout: 3000,
  requestTimeout: 10000,
  retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 },
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, level, log }) => {
    const { message, ...extra } = log;
    process.stderr.write(`[${level}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`);
  },
});

async function txnMode() {
  const [topic, partitionsArg, transactionalId, group, input, perTxnArg] = rest;
  const partitions = Number(partitionsArg);
  const perTxn = Number(perTxnArg);
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const steps = [['c1', '5', true], ['c2', '7', true], ['a3', '9', false]];
  for (const [tag, offset, commit] of steps) {
    const txn = await producer.transaction();
    const messages = [];
    for (let i = 0; i < perTxn; i++) messages.push({ partition: i % partitions, key: tag, value: `${tag}-${i}` });
    await txn.send({ topic, messages });
    await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic: input, partitions: [{ partition: 0, offset }] }] });
    if (commit) {
      await txn.commit();
      out(`committed ${tag}`);
    } else {
      await txn.abort();
      out(`aborted ${tag}`);
    }
  }
  await producer.disconnect();
  out('txn.done=true');
}

async function fencedMode() {
  const [topic, transactionalId, goFile] = rest;
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const txn = await producer.transaction();
  await txn.send({ topic, messages: [{ partition: 0, value: 'z-old' }] });
  out('open');
  while (!fs.existsSync(goFile)) await new Promise((resolve) => setTimeout(resolve, 50));
  try {
    await txn.send({ topic, messages: [{ partition: 0, value: 'z-late' }] });
    await txn.commit();
    out('commit.ok');
  } catch (e) {
    out(`fenced ${e.type || e.name}`);
  }
  await producer.disconnect().catch(() => {});
}

(async () => {
  if (mode === 'txn') await txnMode();
  else if (mode === 'fenced') await fencedMode();
  else throw new Error(`unknown mode ${mode}`);
  exitAfterFlush(0);
})().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  exitAfterFlush(1);
});
