// Drives the stock kafkajs 2.2.4 admin client against a groupcoord server.
// Usage: node admin_bootstrap.js <bootstrap> <topic> <partitions> <grow-to>
// Prints ONE JSON object on the last stdout line: {step: result | {error: "..."}}.
'use strict';

const { Kafka, logLevel } = require('kafkajs');
// process.exit() does not wait for a piped stdout to drain, and output past the pipe buffer
// would be lost: exit from the callback of an empty write, which runs after earlier writes.
const exitAfterFlush = (code) => process.stdout.write('', () => process.exit(code));

const [bootstrap, topic, partitionsArg, growToArg] = process.argv.slice(2);
const partitions = Number(partitionsArg);
const growTo = Number(growToArg);

const logs = [];
const kafka = new Kafka({
  clientId: 'groupcoord-kafkajs-admin',
  brokers: [bootstrap],
  connectionTimeout: 3000,
  requestTimeout: 8000,
  retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 },
  logLevel: logLevel.INFO,
  // Keep kafkajs' own log lines off stdout (which carries the JSON result).
  logCreator: () => ({ namespace, level, log }) => {
    const { message, ...extra } = log;
    const line = `[${level}] ${namespace}: ${message} ${JSON.stringify(extra)}`;
    logs.push(line);
    process.stderr.write(line + '\n');
  },
});

function describeError(e) {
  const parts = [`${e.name}: ${e.message}`];
  if (e.type) parts.push(`type=${e.type}`);
  if (e.code !== undefined) parts.push(`code=${e.code}`);
  if (e.errors) parts.push(`errors=${JSON.stringify(e.errors.map((x) => x.message || String(x)))}`);
  if (e.cause) parts.push(`cause=${e.cause.name}: ${e.cause.message}`);
  return parts.join(' ');
}

async function step(result, name, fn) {
  try {
    result[name] = await fn();
  } catch (e) {
    result[name] = { error: describeError(e) };
  }
}

function summarize(meta) {
  const t = meta.topics.find((x) => x.name === topic);
  if (!t) return { found: false };
  const parts = [...t.partitions].sort((a, b) => a.partitionId - b.partitionId);
  return {
    found: true,
    partitions: parts.length,
    partitionIds: parts.map((p) => p.partitionId),
    leaders: parts.map((p) => p.leader),
    replicas: parts.map((p) => p.replicas),
    isr: parts.map((p) => p.isr),
    errors: parts.map((p) => p.partitionErrorCode),
  };
}

async function main() {
  const admin = kafka.admin();
  const result = {};
  await step(result, 'connect', async () => { await admin.connect(); return true; });
  await step(result, 'cluster', async () => admin.describeCluster());
  await step(result, 'create', async () => admin.createTopics({
    topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: 5000,
  }));
  // kafkajs returns false (not an error) when the topic already exists.
  await step(result, 'createAgain', async () => admin.createTopics({
    topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
    waitForLeaders: false,
  }));
  await step(result, 'list', async () => (await admin.listTopics()).includes(topic));
  await step(result, 'describe', async () => summarize(await admin.fetchTopicMetadata({ topics: [topic] })));
  await step(result, 'grow', async () => {
    await admin.createPartitions({ topicPartitions: [{ topic, count: growTo }], timeout: 5000 });
    return true;
  });
  await step(result, 'afterGrow', async () => summarize(await admin.fetchTopicMetadata({ topics: [topic] })));
  await step(result, 'delete', async () => { await admin.deleteTopics({ topics: [topic], timeout: 5000 }); return true; });
  await step(result, 'listAfterDelete', async () => (await admin.listTopics()).includes(topic));
  await step(result, 'disconnect', async () => { await admin.disconnect(); return true; });
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().then(
  () => exitAfterFlush(0),
  (e) => { process.stderr.write(`fatal: ${e.stack}\n`); process.exit(2); },
);
