// Reads __transaction_state records (TransactionLogKey / TransactionLogValue) with Apache Kafka's
// own protocol type code, for tests/clients/test_txn_log_compat.py.
//
// The generated TransactionLogKey/Value classes are not in kafka-clients (they live in Kafka's
// transaction-coordinator module), so the schemas are declared here from the message definitions
// (transaction-coordinator/src/main/resources/common/message/TransactionLogKey.json and
// TransactionLogValue.json of apache/kafka), as Kafka's generator declares them: version 0
// non-flexible (STRING, ArrayOf), version 1 flexible (COMPACT_STRING, CompactArrayOf, a tagged
// fields section per struct with tags 0 PreviousProducerId, 1 NextProducerId and
// 2 ClientTransactionVersion). Each key and value is read with Schema.read, must be consumed
// exactly, and is written back with Schema.write: "roundtrip" says whether Kafka's writer gives
// the same bytes back.
//
// Usage: java ... TxnLogCheck hex KEY_HEX VALUE_HEX [KEY_HEX VALUE_HEX ...]   ("-": a tombstone)
//        java ... TxnLogCheck segment SEGMENT.log [...]   (every record, after ensureValid())
// Prints one JSON object per record.

import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.util.Map;

import org.apache.kafka.common.protocol.types.ArrayOf;
import org.apache.kafka.common.protocol.types.CompactArrayOf;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.Struct;
import org.apache.kafka.common.protocol.types.Type;
import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;

public class TxnLogCheck {

    static final Schema KEY_0 = new Schema(new Field("transactional_id", Type.STRING, ""));

    static final Schema PARTITIONS_0 = new Schema(
        new Field("topic", Type.STRING, ""),
        new Field("partition_ids", new ArrayOf(Type.INT32), ""));

    static final Schema PARTITIONS_1 = new Schema(
        new Field("topic", Type.COMPACT_STRING, ""),
        new Field("partition_ids", new CompactArrayOf(Type.INT32), ""),
        Field.TaggedFieldsSection.of());

    static final Schema VALUE_0 = new Schema(
        new Field("producer_id", Type.INT64, ""),
        new Field("producer_epoch", Type.INT16, ""),
        new Field("transaction_timeout_ms", Type.INT32, ""),
        new Field("transaction_status", Type.INT8, ""),
        new Field("transaction_partitions", ArrayOf.nullable(PARTITIONS_0), ""),
        new Field("transaction_last_update_timestamp_ms", Type.INT64, ""),
        new Field("transaction_start_timestamp_ms", Type.INT64, ""));

    static final Schema VALUE_1 = new Schema(
        new Field("producer_id", Type.INT64, ""),
        new Field("producer_epoch", Type.INT16, ""),
        new Field("transaction_timeout_ms", Type.INT32, ""),
        new Field("transaction_status", Type.INT8, ""),
        new Field("transaction_partitions", CompactArrayOf.nullable(PARTITIONS_1), ""),
        new Field("transaction_last_update_timestamp_ms", Type.INT64, ""),
        new Field("transaction_start_timestamp_ms", Type.INT64, ""),
        Field.TaggedFieldsSection.of(
            0, new Field("previous_producer_id", Type.INT64, ""),
            1, new Field("next_producer_id", Type.INT64, ""),
            2, new Field("client_transaction_version", Type.INT16, "")));

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        if (args[0].equals("hex")) {
            for (int i = 1; i + 1 < args.length; i += 2) {
                ByteBuffer value = args[i + 1].equals("-") ? null : ByteBuffer.wrap(unhex(args[i + 1]));
                out.println(record(-1, ByteBuffer.wrap(unhex(args[i])), value));
            }
            return;
        }
        for (int i = 1; i < args.length; i++) {
            try (FileRecords records = FileRecords.open(new File(args[i]))) {
                for (FileChannelRecordBatch batch : records.batches()) {
                    batch.ensureValid();
                    if (batch.isControlBatch()) continue;
                    for (Record r : batch) {
                        out.println(record(r.offset(), r.key(), r.hasValue() ? r.value() : null));
                    }
                }
            }
        }
    }

    static String record(long offset, ByteBuffer key, ByteBuffer value) {
        StringBuilder s = new StringBuilder("{\"offset\":").append(offset);
        short keyVersion = key.getShort(0);
        s.append(",\"key_version\":").append(keyVersion);
        boolean roundtrip = true;
        if (keyVersion == 0) {
            ByteBuffer body = key.duplicate();
            body.position(body.position() + 2);
            Struct k = KEY_0.read(body);
            roundtrip &= !body.hasRemaining() && rewritten(KEY_0, keyVersion, k).equals(key.duplicate());
            s.append(",\"transactional_id\":").append(quote((String) k.get("transactional_id")));
        }
        if (value == null) {
            s.append(",\"value\":null");
        } else {
            short version = value.getShort(0);
            Schema schema = version == 0 ? VALUE_0 : VALUE_1;
            ByteBuffer body = value.duplicate();
            body.position(body.position() + 2);
            Struct v = schema.read(body);
            roundtrip &= !body.hasRemaining() && rewritten(schema, version, v).equals(value.duplicate());
            s.append(",\"value\":{\"version\":").append(version)
                .append(",\"producer_id\":").append(v.get("producer_id"))
                .append(",\"producer_epoch\":").append(v.get("producer_epoch"))
                .append(",\"transaction_timeout_ms\":").append(v.get("transaction_timeout_ms"))
                .append(",\"transaction_status\":").append(v.get("transaction_status"))
                .append(",\"transaction_partitions\":");
            Object[] partitions = (Object[]) v.get("transaction_partitions");
            if (partitions == null) {
                s.append("null");
            } else {
                s.append("[");
                for (int i = 0; i < partitions.length; i++) {
                    Struct p = (Struct) partitions[i];
                    s.append(i == 0 ? "" : ",").append("[").append(quote((String) p.get("topic"))).append(",[");
                    Object[] ids = (Object[]) p.get("partition_ids");
                    for (int j = 0; j < ids.length; j++) s.append(j == 0 ? "" : ",").append(ids[j]);
                    s.append("]]");
                }
                s.append("]");
            }
            s.append(",\"transaction_last_update_timestamp_ms\":").append(v.get("transaction_last_update_timestamp_ms"))
                .append(",\"transaction_start_timestamp_ms\":").append(v.get("transaction_start_timestamp_ms"));
            if (version >= 1) {
                @SuppressWarnings("unchecked")
                Map<Integer, Object> tags = (Map<Integer, Object>) v.get("_tagged_fields");
                s.append(",\"previous_producer_id\":").append(tags.getOrDefault(0, -1L))
                    .append(",\"next_producer_id\":").append(tags.getOrDefault(1, -1L))
                    .append(",\"client_transaction_version\":").append(tags.getOrDefault(2, (short) 0))
                    .append(",\"tags\":").append(tags.keySet().toString().replace(" ", ""));
            }
            s.append("}");
        }
        return s.append(",\"roundtrip\":").append(roundtrip).append("}").toString();
    }

    static ByteBuffer rewritten(Schema schema, short version, Struct struct) {
        ByteBuffer out = ByteBuffer.allocate(2 + schema.sizeOf(struct));
        out.putShort(version);
        schema.write(out, struct);
        out.flip();
        return out;
    }

    static byte[] unhex(String hex) {
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static String quote(String text) {
        StringBuilder s = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') s.append('\\').append(c);
            else if (c < 0x20) s.append(String.format("\\u%04x", (int) c));
            else s.append(c);
        }
        return s.append('"').toString();
    }
}
