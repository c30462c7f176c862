package io.walhook.change;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.function.Predicate;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.io.SerializedString;

import io.walhook.pgoutput.ReplicaIdentity;
import io.walhook.pgoutput.TupleData;

/**
 * Writes an event as the JSON object of CONTRACT.md section 3, straight from the tuples' bytes
 * through each column's converter. One instance per thread (converters may keep scratch buffers).
 */
public final class EventJsonWriter {

    /** Commit times with microseconds always written, in UTC. */
    static final DateTimeFormatter COMMIT_TIME = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSSSS'Z'")
            .withZone(ZoneOffset.UTC);

    private static final SerializedString ID = new SerializedString("id");
    private static final SerializedString OP = new SerializedString("op");
    private static final SerializedString SCHEMA = new SerializedString("schema");
    private static final SerializedString TABLE = new SerializedString("table");
    private static final SerializedString KEY = new SerializedString("key");
    private static final SerializedString NEW = new SerializedString("new");
    private static final SerializedString OLD = new SerializedString("old");
    private static final SerializedString LSN = new SerializedString("lsn");
    private static final SerializedString TX = new SerializedString("tx");
    private static final SerializedString XID = new SerializedString("xid");
    private static final SerializedString COMMIT_LSN = new SerializedString("commit_lsn");
    private static final SerializedString COMMIT_TIME_FIELD = new SerializedString("commit_time");
    private static final SerializedString SEQ = new SerializedString("seq");
    private static final SerializedString[] OPERATIONS = java.util.Arrays.stream(Operation.values())
            .map(op -> new SerializedString(op.wireName())).toArray(SerializedString[]::new);

    private final JsonFactory factory;

    /*
     * toJson's generator and its output, kept from event to event: creating a generator per event
     * (its context, buffer hand-out and output stream) cost more than writing a small event. A
     * generator that failed mid-event is dropped; so is an output grown past Scratch.RETAIN_LIMIT.
     */
    private ByteArrayOutputStream out = new ByteArrayOutputStream(512);
    private JsonGenerator generator;

    /* The transaction's texts, written by every event of it: formatted once per transaction. */
    private TxInfo lastTx;
    private SerializedString lastCommitLsn;
    private SerializedString lastCommitTime;

    /* A quoted ASCII value (id, lsn) copied as bytes: Jackson writes a String char by char. */
    private final byte[] quoted = new byte[64];
    private final RawUtf8 raw = new RawUtf8();

    public EventJsonWriter(JsonFactory factory) {
        this.factory = factory;
    }

    public EventJsonWriter() {
        this(jsonFactory());
    }

    /** The factory events are written with: characters beyond the BMP stay raw UTF-8, never escaped pairs. */
    public static JsonFactory jsonFactory() {
        return JsonFactory.builder().enable(com.fasterxml.jackson.core.json.JsonWriteFeature.COMBINE_UNICODE_SURROGATES_IN_UTF8)
                .build();
    }

    /** The event as UTF-8 JSON bytes. */
    public byte[] toJson(ChangeEvent event) {
        return toJson(event, null);
    }

    /** The event as UTF-8 JSON bytes, with only the columns {@code keep} accepts in new and old (null: all). */
    public byte[] toJson(ChangeEvent event, Predicate<String> keep) {
        out.reset();
        JsonGenerator json = generator;
        generator = null; // kept again only once this event is written whole
        try {
            if (json == null) {
                json = factory.createGenerator(out, JsonEncoding.UTF8);
                // events follow one another at the generator's root: no separator between them
                json.setRootValueSeparator(null);
            }
            write(event, keep, json);
            json.flush();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write event " + event.id(), e);
        }
        byte[] bytes = out.toByteArray();
        if (out.size() > Scratch.RETAIN_LIMIT) {
            out = new ByteArrayOutputStream(512); // one huge event does not pin its size
        } else {
            generator = json;
        }
        return bytes;
    }

    public void write(ChangeEvent event, JsonGenerator json) throws IOException {
        write(event, null, json);
    }

    /** Writes the event; {@code keep} (null: all) chooses the columns of new and old, never of key. */
    public void write(ChangeEvent event, Predicate<String> keep, JsonGenerator json) throws IOException {
        json.writeStartObject();
        json.writeFieldName(ID);
        writePlain(event.id(), json);
        json.writeFieldName(OP);
        json.writeString(OPERATIONS[event.op().ordinal()]);
        RelationInfo relation = event.relation();
        json.writeFieldName(SCHEMA);
        if (relation != null && relation.jsonSchema() != null) {
            json.writeString(relation.jsonSchema());
        } else {
            json.writeString(event.schema());
        }
        json.writeFieldName(TABLE);
        if (relation != null && relation.jsonTable() != null) {
            json.writeString(relation.jsonTable());
        } else {
            json.writeString(event.table());
        }
        switch (event.op()) {
            case INSERT, UPDATE, DELETE -> writeRow(event, keep, json);
            case TRUNCATE -> {
                json.writeObjectFieldStart("truncate");
                json.writeBooleanField("cascade", event.truncateCascade());
                json.writeBooleanField("restart_identity", event.truncateRestartIdentity());
                json.writeEndObject();
            }
            case MESSAGE -> writeMessage(event, json);
        }
        json.writeFieldName(LSN);
        writePlain(event.lsn().toString(), json);
        TxInfo tx = event.tx();
        if (tx != lastTx) {
            lastCommitLsn = new SerializedString(tx.commitLsn().toString());
            String time = formatTime(tx.commitTime());
            lastCommitTime = time == null ? null : new SerializedString(time);
            lastTx = tx;
        }
        json.writeFieldName(TX);
        json.writeStartObject();
        json.writeFieldName(XID);
        json.writeNumber(tx.xid());
        json.writeFieldName(COMMIT_LSN);
        json.writeString(lastCommitLsn);
        json.writeFieldName(COMMIT_TIME_FIELD);
        if (lastCommitTime != null) {
            json.writeString(lastCommitTime);
        } else {
            json.writeNull();
        }
        json.writeFieldName(SEQ);
        json.writeNumber(event.seq());
        json.writeEndObject();
        json.writeEndObject();
    }

    /**
     * Writes a JSON string of printable ASCII that needs no escape (ids, LSNs) as bytes, exactly as
     * {@code writeString} would; any other text goes through {@code writeString}.
     */
    private void writePlain(String text, JsonGenerator json) throws IOException {
        int length = text.length();
        if (length + 2 > quoted.length || !(json instanceof com.fasterxml.jackson.core.json.UTF8JsonGenerator)) {
            json.writeString(text);
            return;
        }
        quoted[0] = '"';
        for (int i = 0; i < length; i++) {
            char c = text.charAt(i);
            if (c < 0x20 || c > 0x7E || c == '"' || c == '\\') {
                json.writeString(text);
                return;
            }
            quoted[i + 1] = (byte) c;
        }
        quoted[length + 1] = '"';
        json.writeRawValue(raw.window(quoted, 0, length + 2));
    }

    /** A commit time as events write it: UTC, microseconds, {@code Z}; null stays null. */
    public static String formatTime(Instant time) {
        return time == null ? null : COMMIT_TIME.format(time);
    }

    private static void writeRow(ChangeEvent event, Predicate<String> keep, JsonGenerator json) throws IOException {
        RelationInfo relation = event.relation();
        TupleData newRow = event.newRow();
        TupleData oldRow = event.oldRow();
        TupleData keySource = event.keyTuple() != null ? event.keyTuple() : oldRow != null ? oldRow : newRow;
        json.writeFieldName(KEY);
        writeColumns(relation, keySource, null, true, null, json);
        json.writeFieldName(NEW);
        int[] unchanged = writeColumns(relation, newRow, oldRow, false, keep, json);
        json.writeFieldName(OLD);
        if (oldRow != null && relation.replicaIdentity() == ReplicaIdentity.FULL) {
            writeColumns(relation, oldRow, null, false, keep, json);
        } else {
            json.writeNull();
        }
        if (unchanged != null && unchanged[0] > 0) {
            json.writeArrayFieldStart("unchanged");
            for (int i = 1; i <= unchanged[0]; i++) {
                json.writeString(relation.columnName(unchanged[i]));
            }
            json.writeEndArray();
        }
    }

    /**
     * Writes a tuple as an object, or null when there is none. An unchanged TOASTed column ('u')
     * is filled from {@code fill} (the old row under FULL) when it holds the value, else left out
     * and returned: element 0 counts them, the rest are their column indexes.
     */
    private static int[] writeColumns(RelationInfo relation, TupleData tuple, TupleData fill, boolean keysOnly,
            Predicate<String> keep, JsonGenerator json) throws IOException {
        if (tuple == null) {
            json.writeNull();
            return null;
        }
        if (tuple.size() != relation.columnCount()) {
            throw new IllegalStateException("tuple of " + tuple.size() + " columns for " + relation + " with "
                    + relation.columnCount() + " columns");
        }
        int[] unchanged = null;
        json.writeStartObject();
        for (int i = 0; i < tuple.size(); i++) {
            if (keysOnly && !relation.isKey(i) || keep != null && !keep.test(relation.columnName(i))) {
                continue;
            }
            switch (tuple.kind(i)) {
                case NULL -> {
                    writeColumnName(relation, i, json);
                    json.writeNull();
                }
                case TEXT, BINARY -> {
                    writeColumnName(relation, i, json);
                    relation.converter(i).write(json, tuple, i);
                }
                case UNCHANGED_TOAST -> {
                    if (fill != null && fill.hasValue(i)) {
                        writeColumnName(relation, i, json);
                        relation.converter(i).write(json, fill, i);
                    } else {
                        if (unchanged == null) {
                            unchanged = new int[tuple.size() + 1];
                        }
                        unchanged[++unchanged[0]] = i;
                    }
                }
            }
        }
        json.writeEndObject();
        return unchanged;
    }

    private static void writeColumnName(RelationInfo relation, int column, JsonGenerator json) throws IOException {
        SerializedString name = relation.jsonName(column);
        if (name != null) {
            json.writeFieldName(name);
        } else {
            json.writeFieldName(relation.columnName(column));
        }
    }

    private static void writeMessage(ChangeEvent event, JsonGenerator json) throws IOException {
        json.writeObjectFieldStart("message");
        json.writeStringField("prefix", event.messagePrefix());
        byte[] content = event.messageContent();
        String text = utf8OrNull(content);
        if (text != null) {
            json.writeStringField("content", text);
        } else {
            json.writeStringField("content", Base64.getEncoder().encodeToString(content));
            json.writeStringField("content_encoding", "base64");
        }
        json.writeBooleanField("transactional", event.messageTransactional());
        json.writeEndObject();
    }

    private static String utf8OrNull(byte[] bytes) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(java.nio.ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }
}
