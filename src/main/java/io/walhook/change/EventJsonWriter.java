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

    private final JsonFactory factory;

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
        ByteArrayOutputStream out = new ByteArrayOutputStream(256);
        try (JsonGenerator json = factory.createGenerator(out, JsonEncoding.UTF8)) {
            write(event, keep, json);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write event " + event.id(), e);
        }
        return out.toByteArray();
    }

    public void write(ChangeEvent event, JsonGenerator json) throws IOException {
        write(event, null, json);
    }

    /** Writes the event; {@code keep} (null: all) chooses the columns of new and old, never of key. */
    public void write(ChangeEvent event, Predicate<String> keep, JsonGenerator json) throws IOException {
        json.writeStartObject();
        json.writeStringField("id", event.id());
        json.writeStringField("op", event.op().wireName());
        json.writeStringField("schema", event.schema());
        json.writeStringField("table", event.table());
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
        json.writeStringField("lsn", event.lsn().toString());
        TxInfo tx = event.tx();
        json.writeObjectFieldStart("tx");
        json.writeNumberField("xid", tx.xid());
        json.writeStringField("commit_lsn", tx.commitLsn().toString());
        json.writeStringField("commit_time", formatTime(tx.commitTime()));
        json.writeNumberField("seq", event.seq());
        json.writeEndObject();
        json.writeEndObject();
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
        json.writeFieldName("key");
        writeColumns(relation, keySource, null, true, null, json);
        json.writeFieldName("new");
        int[] unchanged = writeColumns(relation, newRow, oldRow, false, keep, json);
        json.writeFieldName("old");
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
                case NULL -> json.writeNullField(relation.columnName(i));
                case TEXT, BINARY -> {
                    json.writeFieldName(relation.columnName(i));
                    relation.converter(i).write(json, tuple, i);
                }
                case UNCHANGED_TOAST -> {
                    if (fill != null && fill.hasValue(i)) {
                        json.writeFieldName(relation.columnName(i));
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
