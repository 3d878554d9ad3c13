// Reads .log segment files of a groupcoord data directory with Apache Kafka's own classes, for
// tests/clients/test_txn_log_compat.py: FileRecords (what a Kafka broker and kafka-dump-log open a
// segment with), ensureValid() on every batch (size, magic, CRC-32C judged by Kafka), and
// EndTransactionMarker.deserialize for the records of control batches (KIP-98 transaction markers:
// key version + ControlRecordType, value version + coordinator epoch). Each control batch is also
// rebuilt with Kafka's MemoryRecords.withEndTransactionMarker from the fields read and compared
// byte for byte ("same_as_kafka_writer").
//
// Prints one JSON object per line: per batch {"file", "base", "last", "count", "magic", "crc",
// "codec", "ts_type", "max_ts", "pid", "epoch", "base_seq", "last_seq", "txn", "control",
// "leader_epoch", then "markers" (control batches) or "records" (offset and hex value, data
// batches; none for __consumer_offsets partitions, whose records are the group coordinator's)},
// then per file {"file", "size", "read"}: the file's size and the bytes Kafka's iterator covered.
//
// Usage: java -cp kafka-clients.jar:... TxnSegmentCheck SEGMENT.log [SEGMENT.log ...]

import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;

import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.Record;

public class TxnSegmentCheck {

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        for (String path : args) {
            File file = new File(path);
            String quoted = quote(file.getParentFile().getName() + "/" + file.getName());
            boolean offsetsTopic = file.getParentFile().getName().startsWith("__consumer_offsets-");
            // Read-only use: the server that wrote the file has stopped; FileRecords.open does not
            // preallocate or truncate.
            try (FileRecords records = FileRecords.open(file)) {
                long read = 0;
                for (FileChannelRecordBatch batch : records.batches()) {
                    batch.ensureValid();
                    read += batch.sizeInBytes();
                    StringBuilder line = new StringBuilder();
                    line.append("{\"file\":").append(quoted)
                        .append(",\"base\":").append(batch.baseOffset())
                        .append(",\"last\":").append(batch.lastOffset())
                        .append(",\"count\":").append(batch.countOrNull())
                        .append(",\"magic\":").append(batch.magic())
                        .append(",\"crc\":").append(batch.checksum())
                        .append(",\"codec\":").append(quote(batch.compressionType().name))
                        .append(",\"ts_type\":").append(quote(batch.timestampType().name))
                        .append(",\"max_ts\":").append(batch.maxTimestamp())
                        .append(",\"pid\":").append(batch.producerId())
                        .append(",\"epoch\":").append(batch.producerEpoch())
                        .append(",\"base_seq\":").append(batch.baseSequence())
                        .append(",\"last_seq\":").append(batch.lastSequence())
                        .append(",\"txn\":").append(batch.isTransactional())
                        .append(",\"control\":").append(batch.isControlBatch())
                        .append(",\"leader_epoch\":").append(batch.partitionLeaderEpoch());
                    if (batch.isControlBatch()) {
                        line.append(",\"markers\":[");
                        String sep = "";
                        for (Record record : batch) {
                            record.ensureValid();
                            EndTransactionMarker marker = EndTransactionMarker.deserialize(record);
                            line.append(sep).append("{\"offset\":").append(record.offset())
                                .append(",\"type\":").append(quote(marker.controlType().name()))
                                .append(",\"coordinator_epoch\":").append(marker.coordinatorEpoch())
                                .append(",\"key_version\":").append(record.key().getShort(0))
                                .append(",\"value_version\":").append(record.value().getShort(0))
                                .append(",\"value_size\":").append(record.valueSize())
                                .append("}");
                            sep = ",";
                        }
                        line.append("]");
                        // The same marker built by Kafka's own writer (what a broker appends for
                        // WriteTxnMarkers): byte for byte the batch we read, CRC included?
                        if (batch.countOrNull() != null && batch.countOrNull() == 1) {
                            Record record = batch.iterator().next();
                            EndTransactionMarker marker = EndTransactionMarker.deserialize(record);
                            ByteBuffer theirs = MemoryRecords.withEndTransactionMarker(batch.baseOffset(),
                                    batch.maxTimestamp(), batch.partitionLeaderEpoch(), batch.producerId(),
                                    batch.producerEpoch(), marker).buffer();
                            ByteBuffer ours = ByteBuffer.allocate(batch.sizeInBytes());
                            batch.writeTo(ours);
                            ours.flip();
                            line.append(",\"same_as_kafka_writer\":").append(ours.equals(theirs));
                        }
                    } else if (!offsetsTopic) {
                        line.append(",\"records\":[");
                        String sep = "";
                        for (Record record : batch) {
                            record.ensureValid();
                            line.append(sep).append("{\"offset\":").append(record.offset())
                                .append(",\"value\":").append(record.hasValue() ? quote(hex(record.value())) : "null")
                                .append("}");
                            sep = ",";
                        }
                        line.append("]");
                    }
                    out.println(line.append("}"));
                }
                out.println("{\"file\":" + quoted + ",\"size\":" + records.sizeInBytes() + ",\"read\":" + read + "}");
            }
        }
    }

    static String hex(ByteBuffer buf) {
        StringBuilder s = new StringBuilder();
        while (buf.hasRemaining()) s.append(String.format("%02x", buf.get() & 0xff));
        return s.toString();
    }

    // Names here are topic directories, segment file names and enum names: no quote or backslash.
    static String quote(String text) {
        return "\"" + text + "\"";
    }
}
