// Reads a segment file with Apache Kafka's own classes and prints one canonical line per batch
// and per record, for tests/protocol/test_java_crosscheck.py to compare with our decoders.
//
// Batches are opened with FileRecords (what a broker uses for a .log file) and checked with
// ensureValid(), so magic, size and CRC-32C are judged by Kafka itself, and records come out of
// Kafka's own decompression (gzip, xerial snappy, lz4 frame, zstd). The __consumer_offsets keys
// and values are then read by hand from the schemas (OffsetCommitKey/Value, GroupMetadataKey/Value,
// versions 0-4, v4 flexible), independently of the Python code.
//
// It can also write: "SegmentCheck write FILE" writes batches built by Kafka's MemoryRecords (the
// producer's own batch builder and compressors, e.g. xerial-framed snappy from snappy-java), one per
// codec plus a transactional one, holding the records described at writeRecords() below, so the
// test can check that our decoder reads what Java clients produce.
//
// Usage: java -cp kafka-clients.jar:... SegmentCheck FILE
//        java -cp kafka-clients.jar:... SegmentCheck write FILE

import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;

public class SegmentCheck {

    public static void main(String[] args) throws Exception {
        if (args[0].equals("write")) {
            write(new File(args[1]));
            return;
        }
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        try (FileRecords records = FileRecords.open(new File(args[0]))) {
            for (FileChannelRecordBatch batch : records.batches()) {
                batch.ensureValid();
                out.println(String.format("batch base=%d last=%d count=%d codec=%s control=%b txn=%b pid=%d epoch=%d",
                        batch.baseOffset(), batch.lastOffset(), batch.countOrNull(), batch.compressionType().name,
                        batch.isControlBatch(), batch.isTransactional(), batch.producerId(), batch.producerEpoch()));
                for (Record record : batch) {
                    record.ensureValid();
                    if (batch.isControlBatch()) {
                        out.println(String.format("control offset=%d type=%s", record.offset(),
                                ControlRecordType.parse(record.key())));
                        continue;
                    }
                    out.println(String.format("record offset=%d ts=%d key=%s value=%s", record.offset(),
                            record.timestamp(), key(record.key()), value(record.key(), record.value())));
                }
            }
        }
    }

    static final int RECORDS_PER_BATCH = 2000;

    /**
     * Record i: timestamp 1700000000000 + i; key "key-i", null when i % 7 == 0; value "value-i"
     * repeated i % 13 times, null when i % 11 == 0; one header ("h" + i % 3, "v" + i) when
     * i % 5 == 0, and a second one with a null value when i % 10 == 0.
     */
    static SimpleRecord[] writeRecords() {
        SimpleRecord[] records = new SimpleRecord[RECORDS_PER_BATCH];
        for (int i = 0; i < RECORDS_PER_BATCH; i++) {
            byte[] key = i % 7 == 0 ? null : ("key-" + i).getBytes(StandardCharsets.UTF_8);
            byte[] value = i % 11 == 0 ? null : ("value-" + i).repeat(i % 13).getBytes(StandardCharsets.UTF_8);
            List<Header> headers = new ArrayList<>();
            if (i % 5 == 0) headers.add(new RecordHeader("h" + (i % 3), ("v" + i).getBytes(StandardCharsets.UTF_8)));
            if (i % 10 == 0) headers.add(new RecordHeader("empty", null));
            records[i] = new SimpleRecord(1700000000000L + i, key, value, headers.toArray(new Header[0]));
        }
        return records;
    }

    static void write(File file) throws Exception {
        Compression[] codecs = {Compression.NONE, Compression.gzip().build(), Compression.snappy().build(),
            Compression.lz4().build(), Compression.zstd().build()};
        List<MemoryRecords> batches = new ArrayList<>();
        long offset = 0;
        for (Compression codec : codecs) {
            batches.add(MemoryRecords.withRecords(offset, codec, writeRecords()));
            offset += RECORDS_PER_BATCH;
        }
        batches.add(MemoryRecords.withTransactionalRecords(offset, Compression.snappy().build(), 4242L, (short) 3, 0, 7,
                writeRecords()));
        try (FileChannel channel = FileChannel.open(file.toPath(), StandardOpenOption.CREATE,
                StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            for (MemoryRecords batch : batches) {
                ByteBuffer buf = batch.buffer();
                while (buf.hasRemaining()) channel.write(buf);
            }
        }
    }

    /** A cursor over one key or value; 'flexible' switches strings/bytes/arrays to compact forms. */
    static final class Reader {
        final ByteBuffer buf;
        final boolean flexible;

        Reader(ByteBuffer buf, boolean flexible) {
            this.buf = buf;
            this.flexible = flexible;
        }

        int uvarint() {
            int value = 0;
            for (int shift = 0; shift < 35; shift += 7) {
                int b = buf.get() & 0xff;
                value |= (b & 0x7f) << shift;
                if (b < 0x80) return value;
            }
            throw new IllegalStateException("varint too long");
        }

        String string() {
            int n = flexible ? uvarint() - 1 : buf.getShort();
            if (n < 0) return "null";
            byte[] raw = new byte[n];
            buf.get(raw);
            return "'" + new String(raw, StandardCharsets.UTF_8) + "'";
        }

        int bytesLength() {
            int n = flexible ? uvarint() - 1 : buf.getInt();
            buf.position(buf.position() + n);
            return n;
        }

        int arrayLength() {
            return flexible ? uvarint() - 1 : buf.getInt();
        }

        void taggedFields() {
            if (!flexible) return;
            int count = uvarint();
            for (int i = 0; i < count; i++) {
                uvarint();
                int size = uvarint();
                buf.position(buf.position() + size);
            }
        }
    }

    static String key(ByteBuffer raw) {
        ByteBuffer buf = raw.duplicate();
        short version = buf.getShort();
        Reader r = new Reader(buf, false);
        if (version == 0 || version == 1) {
            return String.format("offset_commit(v%d,%s,%s,%d)", version, r.string(), r.string(), buf.getInt());
        }
        if (version == 2) {
            return String.format("group_metadata(v%d,%s)", version, r.string());
        }
        return "unknown(v" + version + ")";
    }

    static String value(ByteBuffer rawKey, ByteBuffer raw) {
        if (raw == null) return "null";
        short keyVersion = rawKey.duplicate().getShort();
        ByteBuffer buf = raw.duplicate();
        short version = buf.getShort();
        Reader r = new Reader(buf, version >= 4);
        if (keyVersion == 0 || keyVersion == 1) {
            long offset = buf.getLong();
            int leaderEpoch = version >= 3 ? buf.getInt() : -1;
            String metadata = r.string();
            long commit = buf.getLong();
            long expire = version == 1 ? buf.getLong() : -1;
            r.taggedFields();
            return String.format("offset_commit(v%d,%d,%d,%s,%d,%d)", version, offset, leaderEpoch, metadata,
                    commit, expire);
        }
        if (keyVersion == 2) {
            String protocolType = r.string();
            int generation = buf.getInt();
            String protocol = r.string();
            String leader = r.string();
            long stateTimestamp = version >= 2 ? buf.getLong() : -1;
            int count = r.arrayLength();
            List<String> members = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                String memberId = r.string();
                String instanceId = version >= 3 ? r.string() : "null";
                String clientId = r.string();
                String clientHost = r.string();
                int rebalanceTimeout = version >= 1 ? buf.getInt() : -1;
                int sessionTimeout = buf.getInt();
                int subscription = r.bytesLength();
                int assignment = r.bytesLength();
                r.taggedFields();
                members.add(String.format("member(%s,%s,%s,%s,%d,%d,%d,%d)", memberId, instanceId, clientId,
                        clientHost, rebalanceTimeout, sessionTimeout, subscription, assignment));
            }
            r.taggedFields();
            return String.format("group_metadata(v%d,%s,%d,%s,%s,%d,[%s])", version, protocolType, generation,
                    protocol, leader, stateTimestamp, String.join(";", members));
        }
        return "unknown";
    }
}
