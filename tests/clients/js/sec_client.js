// Drives the stock kafkajs 2.2.4 client against a groupcoord node with TLS and SASL.
// Usage: node sec_client.js <topic> <cases.json>
// cases.json: [{tag, mode: "roundtrip" | "probe", brokers, ssl?: {ca, cert?, key?} (PEM file names),
//               sasl?: {mechanism, username, password}}]
// roundtrip: produce a record, consume it in group sec-<tag> and commit; probe: admin describeCluster.
// Prints ONE JSON object on the last stdout line: {tag: "ok" | {error: "..."}}.
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const exitAfterFlush = (code) => process.stdout.write('', () => process.exit(code));
const [topic, casesFile] = process.argv.slice(2);
const cases = JSON.parse(fs.readFileSync(casesFile, 'utf8'));

function describeError(e) {
  const parts = [`${e.name}: ${e.message}`];
  if (e.type) parts.push(`type=${e.type}`);
  return parts.join(' ');
}

function client(c) {
  const ssl = c.ssl && {
    ca: [fs.readFileSync(c.ssl.ca, 'utf8')],
    cert: c.ssl.cert && fs.readFileSync(c.ssl.cert, 'utf8'),
    key: c.ssl.key && fs.readFileSync(c.ssl.key, 'utf8'),
  };
  return new Kafka({
    clientId: `groupcoord-sec-${c.tag}`,
    brokers: c.brokers,
    ssl,
    sasl: c.sasl,
    connectionTimeout: 5000,
    requestTimeout: 10000,
    // An authentication failure is not retried by kafkajs; other errors get a few quick retries.
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 500 },
    logLevel: logLevel.ERROR,
    logCreator: () => ({ namespace, log }) => process.stderr.write(`${namespace}: ${log.message}\n`),
  });
}

async function roundtrip(kafka, tag) {
  const producer = kafka.producer();
  await producer.connect();
  try {
    await producer.send({ topic, messages: [{ value: tag }] });
  } finally {
    await producer.disconnect();
  }
  const consumer = kafka.consumer({ groupId: `sec-${tag}`, sessionTimeout: 10000, rebalanceTimeout: 5000 });
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timeout: record not consumed')), 20000);
      consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          if (message.value.toString() === tag) {
            await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
            clearTimeout(timer);
            resolve();
          }
        },
      }).catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return 'ok';
}

async function probe(kafka) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const cluster = await admin.describeCluster();
    return cluster.brokers.length === 1 ? 'ok' : { error: `brokers ${JSON.stringify(cluster.brokers)}` };
  } finally {
    await admin.disconnect();
  }
}

(async () => {
  const result = {};
  for (const c of cases) {
    try {
      result[c.tag] = await (c.mode === 'roundtrip' ? roundtrip(client(c), c.tag) : probe(client(c)));
    } catch (e) {
      result[c.tag] = { error: describeError(e) };
    }
  }
  process.stdout.write(JSON.stringify(result) + '\n');
  exitAfterFlush(0);
})();
