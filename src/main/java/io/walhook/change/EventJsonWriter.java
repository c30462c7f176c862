package io.walhook.change;

import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.function.Predicate;

import io.walhook.pgoutput.ReplicaIdentity;
import io.walhook.pgoutput.TupleData;

/**
 * Writes an event as the JSON object of docs/events.md, straight from the tuples' bytes
 * through each column's converter. One instance per thread (converters may keep scratch buffers).
 */
public final class EventJsonWriter {

    /** Commit times with microseconds always written, in UTC. */
    static final DateTimeFormatter COMMIT_TIME = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSSSS'Z'")
            .withZone(ZoneOffset.UTC);

    private static final byte[] ID = JsonWriter.encodeName("id");
    private static final byte[] KEY = JsonWriter.encodeName("key");
    private static final byte[] NEW = JsonWriter.encodeName("new");
    private static final byte[] OLD = JsonWriter.encodeName("old");
    private static final byte[] UNCHANGED = JsonWriter.encodeName("unchanged");
    private static final byte[][] ROW_IMAGES = {KEY, NEW, OLD};
    private static final byte[] LSN = JsonWriter.encodeName("lsn");
    private static final byte[] TX = JsonWriter.encodeName("tx");
    private static final byte[] XID = JsonWriter.encodeName("xid");
    private static final byte[] COMMIT_LSN = JsonWriter.encodeName("commit_lsn");
    private static final byte[] COMMIT_TIME_FIELD = JsonWriter.encodeName("commit_time");
    private static final byte[] SEQ = JsonWriter.encodeName("seq");
    private static final byte[] BACKFILL = JsonWriter.encodeName("backfill");
    /** An event without a table (a logical message): its op, and null schema and table. */
    private static final byte[][] NO_TABLE_HEADERS = java.util.Arrays.stream(Operation.values())
            .map(op -> RelationInfo.jsonHeader(op, null, null)).toArray(byte[][]::new);

    /*
     * toJson's buffer, kept from event to event; one grown past ConverterBuffers.RETAIN_LIMIT by a huge event
     * is dropped so that it does not pin its size.
     */
    private JsonWriter out = new JsonWriter(512);

    /* The transaction's fields, written by every event of it: encoded once per transaction. */
    private TxInfo lastTx;
    private byte[] lastTxFields;

    /** The event as UTF-8 JSON bytes. */
    public byte[] toJson(ChangeEvent event) {
        return toJson(event, null);
    }

    /** The event as UTF-8 JSON bytes, with only the columns {@code keep} accepts in new and old (null: all). */
    public byte[] toJson(ChangeEvent event, Predicate<String> keep) {
        JsonWriter json = out.reset();
        write(event, keep, json);
        byte[] bytes = json.toByteArray();
        if (json.capacity() > ConverterBuffers.RETAIN_LIMIT) {
            out = new JsonWriter(512);
        }
        return bytes;
    }

    public void write(ChangeEvent event, JsonWriter json) {
        write(event, null, json);
    }

    /**
     * Writes the event; {@code keep} (null: all) chooses the columns of new and old, and under REPLICA
     * IDENTITY FULL (where key is the whole row) those of key but the primary key's.
     *
     * <p>One method for the whole event, rows included, on purpose: at over 325 bytes of bytecode
     * it is above the JIT's limit for inlining a hot callee ({@code FreqInlineSize}), so the
     * routing loop, the encoder and {@link #toJson} all call its one compiled copy. Split in two
     * smaller methods, each caller on the path inlined a copy of its own: the compilation log of a
     * 1,500,000-row drain showed five copies of this writer, a third of the C2 compiler's time.
     * {@code EventJsonWriterShapeTest} keeps it above the limit.
     */
    public void write(ChangeEvent event, Predicate<String> keep, JsonWriter json) {
        json.startObject();
        json.name(ID).string(event.id());
        RelationInfo relation = event.relation();
        Operation op = event.op();
        json.fields(relation != null ? relation.jsonHeader(op) : NO_TABLE_HEADERS[op.ordinal()]);
        if (op == Operation.INSERT || op == Operation.UPDATE || op == Operation.DELETE || op == Operation.READ) {
            TupleData newRow = event.newRow();
            TupleData oldRow = event.oldRow();
            TupleData keySource = event.keySource();
            TupleData oldImage = oldRow != null && relation.replicaIdentity() == ReplicaIdentity.FULL ? oldRow : null;
            int[] unchanged = null;
            // key, new and old through one call site: the JIT compiles the column loop once, not three
            // times into this method
            for (int image = 0; image < ROW_IMAGES.length; image++) {
                json.name(ROW_IMAGES[image]);
                boolean key = image == 0;
                TupleData tuple = key ? keySource : image == 1 ? newRow : oldImage;
                // key is not projected (its columns identify the row), but under FULL it is the whole row: there it
                // leaves out what new and old leave out (an excluded column went out in it), but for the primary key
                int[] left = writeColumns(relation, tuple, image == 1 ? event.newRowFill() : null, key,
                        key && relation.replicaIdentity() != ReplicaIdentity.FULL ? null : keep, json);
                if (image == 1) {
                    unchanged = left;
                }
            }
            if (unchanged != null && unchanged[0] > 0) {
                json.name(UNCHANGED).startArray();
                for (int i = 1; i <= unchanged[0]; i++) {
                    json.string(relation.columnName(unchanged[i]));
                }
                json.endArray();
            }
        } else if (op == Operation.TRUNCATE) {
            json.name("truncate").startObject()
                    .name("cascade").bool(event.truncateCascade())
                    .name("restart_identity").bool(event.truncateRestartIdentity())
                    .endObject();
        } else {
            writeMessage(event, json);
        }
        json.name(LSN).lsn(event.lsn());
        if (event.backfillId() != null) {
            // a backfilled row: read, not committed; no transaction of its own
            json.name(TX).nullValue();
            json.name(BACKFILL).startObject().name(ID).string(event.backfillId()).endObject();
            json.endObject();
            return;
        }
        TxInfo tx = event.tx();
        if (tx != lastTx) {
            String time = formatTime(tx.commitTime());
            lastTxFields = new JsonWriter(96).startObject().name(XID).number(tx.xid())
                    .name(COMMIT_LSN).lsn(tx.commitLsn())
                    .name(COMMIT_TIME_FIELD).string(time).toFieldBytes();
            lastTx = tx;
        }
        json.name(TX).startObject().fields(lastTxFields);
        json.name(SEQ).number(event.seq());
        json.endObject();
        json.endObject();
    }

    /**
     * A commit time as events write it: UTC, microseconds, {@code Z}; null stays null. Spelled out
     * by hand for years 0 to 9999 (every commit time): the formatter's fraction goes through
     * BigDecimal, which cost more than a transaction's worth of events.
     */
    public static String formatTime(Instant time) {
        if (time == null) {
            return null;
        }
        java.time.LocalDateTime t = java.time.LocalDateTime.ofEpochSecond(time.getEpochSecond(), time.getNano(),
                ZoneOffset.UTC);
        if (t.getYear() < 0 || t.getYear() > 9999) {
            return COMMIT_TIME.format(time);
        }
        char[] text = "0000-00-00T00:00:00.000000Z".toCharArray();
        digits(text, 0, 4, t.getYear());
        digits(text, 5, 2, t.getMonthValue());
        digits(text, 8, 2, t.getDayOfMonth());
        digits(text, 11, 2, t.getHour());
        digits(text, 14, 2, t.getMinute());
        digits(text, 17, 2, t.getSecond());
        digits(text, 20, 6, t.getNano() / 1000);
        return new String(text);
    }

    private static void digits(char[] text, int at, int count, int value) {
        for (int p = at + count - 1; p >= at; p--) {
            text[p] = (char) ('0' + value % 10);
            value /= 10;
        }
    }

    /**
     * Writes a tuple as an object, or null when there is none. An unchanged TOASTed column ('u')
     * is filled from {@code fill} (the old row under FULL, or the 'K' tuple for a key column) when
     * it holds the value, else left out
     * and returned: element 0 counts them, the rest are their column indexes.
     */
    private static int[] writeColumns(RelationInfo relation, TupleData tuple, TupleData fill, boolean keysOnly,
            Predicate<String> keep, JsonWriter json) {
        if (tuple == null) {
            json.nullValue();
            return null;
        }
        if (tuple.size() != relation.columnCount()) {
            throw new IllegalStateException("tuple of " + tuple.size() + " columns for " + relation + " with "
                    + relation.columnCount() + " columns");
        }
        int[] unchanged = null;
        json.startObject();
        for (int i = 0; i < tuple.size(); i++) {
            if (keysOnly && !relation.isKey(i)
                    || keep != null && !keep.test(relation.columnName(i)) && !(keysOnly && relation.inOrderKey(i))) {
                continue;
            }
            switch (tuple.kind(i)) {
                case NULL -> json.name(relation.jsonName(i)).nullValue();
                case TEXT, BINARY -> relation.converter(i).write(json.name(relation.jsonName(i)), tuple, i);
                case UNCHANGED_TOAST -> {
                    if (fill != null && fill.hasValue(i)) {
                        json.name(relation.jsonName(i));
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
        json.endObject();
        return unchanged;
    }

    private static void writeMessage(ChangeEvent event, JsonWriter json) {
        json.name("message").startObject();
        json.name("prefix").string(event.messagePrefix());
        byte[] content = event.messageContent();
        String text = utf8OrNull(content);
        if (text != null) {
            json.name("content").string(text);
        } else {
            json.name("content").string(Base64.getEncoder().encodeToString(content));
            json.name("content_encoding").string("base64");
        }
        json.name("transactional").bool(event.messageTransactional());
        json.endObject();
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
