// Drives the stock kafkajs 2.2.4 producer, and reads with a raw Fetch through kafkajs' own broker
// connection (kafkajs' consumer requires a consumer group, which the server does not have yet).
// Line formats: see tests/clients/records_io.py.
//
//   produce <bootstrap> <topic> <records-file> <none|gzip> <idempotent 0|1> <records-per-send>
//       prints "A <index> <partition> <offset>" per record, then produce.acked=N
//   stream <bootstrap> <topic> <partitions> <count> <records-per-send>
//       idempotent producer, value "seq-<n>" to partition n % partitions, one send at a time;
//       prints "A <seq> <partition> <offset>" lines after each send, then stream.acked=N
//   fetch <bootstrap> <topic> <partitions> <total> <timeout-ms> [start-offsets-csv]
//       Fetch requests (kafkajs' Broker.fetch, highest version both sides support) from the
//       given offsets (default 0) until <total> records; prints "R ..." lines, fetch.count=N,
//       fetch.version=<negotiated Fetch version>.
//
// kafkajs keeps headers as an object: duplicate keys become an array under the first key, so the
// order of interleaved duplicate keys is not preserved by the client (sending or reading).
'use strict';

const fs = require('fs');
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');
// process.exit() does not wait for a piped stdout to drain, and output past the pipe buffer
// would be lost: exit from the callback of an empty write, which runs after earlier writes.
const exitAfterFlush = (code) => process.stdout.write('', () => process.exit(code));

const [mode, bootstrap, topic, ...rest] = process.argv.slice(2);

const kafka = new Kafka({
  clientId: 'groupcoord-kafkajs-pc',
  brokers: [bootstrap],
  connectionTimeout: 3000,
  requestTimeout: 10000,
  // The stream outlives a server restart: the client's retries (which reconnecting to the seed
  // broker uses) must cover a restart on a loaded machine (seen: 2.7 s), not only the ~2.6 s that
  // 5 retries give.
  retry: mode === 'stream' ? { retries: 60, initialRetryTime: 100, maxRetryTime: 1000 }
    : { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, level, log }) => {
    const { message, ...extra } = log;
    process.stderr.write(`[${level}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`);
  },
});

const out = (line) => process.stdout.write(line + '\n');

function dec(s) {
  if (s === '-') return null;
  if (!s.startsWith('x')) throw new Error(`bad field ${s}`);
  return Buffer.from(s.slice(1), 'hex');
}

function enc(b) {
  if (b === null || b === undefined) return '-';
  return 'x' + Buffer.from(b).toString('hex');
}

function decHeaders(s) {
  const h = {};
  if (s === 'h') return h;
  for (const item of s.slice(1).split(',')) {
    const c = item.indexOf(':');
    const key = dec(item.slice(0, c)).toString('utf8');
    const value = dec(item.slice(c + 1));
    if (!(key in h)) h[key] = value;
    else if (Array.isArray(h[key])) h[key].push(value);
    else h[key] = [h[key], value];
  }
  return h;
}

function encHeaders(h) {
  const items = [];
  for (const key of Object.keys(h || {})) {
    const values = Array.isArray(h[key]) ? h[key] : [h[key]];
    for (const v of values) items.push(`${enc(Buffer.from(key, 'utf8'))}:${enc(v)}`);
  }
  return 'h' + items.join(',');
}

async function produce() {
  const [file, codec, idempotentArg, chunkArg] = rest;
  const idempotent = idempotentArg === '1';
  const chunk = Number(chunkArg);
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length > 0);
  const producer = kafka.producer({ idempotent, maxInFlightRequests: idempotent ? 1 : undefined });
  await producer.connect();
  let acked = 0;
  try {
    for (let start = 0; start < lines.length; start += chunk) {
      const slice = lines.slice(start, start + chunk);
      const messages = slice.map((l) => {
        const [p, ts, k, v, h] = l.split(' ');
        return { partition: Number(p), timestamp: ts, key: dec(k), value: dec(v), headers: decHeaders(h) };
      });
      const results = await producer.send({
        topic,
        acks: -1,
        compression: codec === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None,
        messages,
      });
      const base = {};
      for (const r of results) {
        if (r.errorCode !== 0) throw new Error(`partition ${r.partition}: error ${r.errorCode}`);
        base[r.partition] = BigInt(r.baseOffset);
      }
      const seen = {};
      messages.forEach((m, i) => {
        const k = seen[m.partition] || 0n;
        seen[m.partition] = k + 1n;
        out(`A ${start + i} ${m.partition} ${base[m.partition] + k}`);
        acked++;
      });
    }
  } finally {
    await producer.disconnect();
  }
  out(`produce.acked=${acked}`);
}

async function stream() {
  const [partitionsArg, countArg, chunkArg] = rest;
  const partitions = Number(partitionsArg);
  const count = Number(countArg);
  const chunk = Number(chunkArg);
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    retry: { retries: 1000, initialRetryTime: 100, maxRetryTime: 1000 },
  });
  await producer.connect();
  out('stream.started=true');
  let acked = 0;
  try {
    for (let start = 0; start < count; start += chunk) {
      const messages = [];
      for (let seq = start; seq < Math.min(count, start + chunk); seq++) {
        messages.push({ partition: seq % partitions, key: `k${seq}`, value: `seq-${seq}` });
      }
      const results = await producer.send({ topic, acks: -1, messages });
      const base = {};
      for (const r of results) base[r.partition] = BigInt(r.baseOffset);
      const seen = {};
      const lines = messages.map((m, i) => {
        const k = seen[m.partition] || 0n;
        seen[m.partition] = k + 1n;
        acked++;
        return `A ${start + i} ${m.partition} ${base[m.partition] + k}`;
      });
      out(lines.join('\n'));
    }
  } finally {
    await producer.disconnect();
  }
  out(`stream.acked=${acked}`);
}

async function fetch() {
  const [partitionsArg, totalArg, timeoutArg, offsetsArg] = rest;
  const partitions = Number(partitionsArg);
  const total = Number(totalArg);
  const deadline = Date.now() + Number(timeoutArg);
  const next = [];
  for (let p = 0; p < partitions; p++) next.push(offsetsArg ? BigInt(offsetsArg.split(',')[p]) : 0n);

  // kafkajs' Cluster is what its consumer uses; it is created by a private factory on Kafka.
  const sym = Object.getOwnPropertySymbols(kafka).find((s) => String(s).includes('createCluster'));
  const cluster = kafka[sym]({ allowAutoTopicCreation: false, isolationLevel: 1 });
  await cluster.connect();
  await cluster.addTargetTopic(topic);
  const leaders = cluster.findLeaderForPartitions(topic, [...Array(partitions).keys()]);
  const nodeIds = Object.keys(leaders);
  if (nodeIds.length !== 1) throw new Error(`expected one leader, got ${JSON.stringify(leaders)}`);
  const broker = await cluster.findBroker({ nodeId: nodeIds[0] });
  out(`fetch.version=${broker.versions[1] ? Math.min(broker.versions[1].maxVersion, 11) : 'none'}`);
  let count = 0;
  while (count < total && Date.now() < deadline) {
    const resp = await broker.fetch({
      replicaId: -1,
      isolationLevel: 1,
      maxWaitTime: 500,
      minBytes: 1,
      maxBytes: 10485760,
      topics: [{
        topic,
        partitions: next.map((o, p) => ({ partition: p, fetchOffset: o.toString(), maxBytes: 1048576 })),
      }],
    });
    for (const t of resp.responses) {
      for (const part of t.partitions) {
        if (part.errorCode !== 0) throw new Error(`fetch partition ${part.partition}: error ${part.errorCode}`);
        for (const m of part.messages) {
          const off = BigInt(m.offset);
          if (off < next[part.partition]) continue; // earlier records of a batch fetched mid-way
          if (m.isControlRecord) continue;
          const tt = m.batchContext && m.batchContext.timestampType === 1 ? 'LogAppendTime' : 'CreateTime';
          out(`R ${part.partition} ${m.offset} ${m.timestamp} ${tt} ${enc(m.key)} ${enc(m.value)} ${encHeaders(m.headers)}`);
          next[part.partition] = off + 1n;
          count++;
        }
      }
    }
  }
  await cluster.disconnect();
  out(`fetch.count=${count}`);
  if (count < total) process.exitCode = 1;
}

({ produce, fetch, stream })[mode]().then(
  () => exitAfterFlush(process.exitCode || 0),
  (e) => { process.stderr.write(`fatal: ${e.stack}\n`); process.exit(2); },
);
