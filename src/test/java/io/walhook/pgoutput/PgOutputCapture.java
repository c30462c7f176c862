package io.walhook.pgoutput;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

/**
 * What one {@link PgOutputScenario} produced on one server at one protocol version: the rows of
 * {@code pg_logical_slot_peek_binary_changes} (lsn, xid, data), the options of the call, and the
 * facts the scenario read from the server while it ran (transaction ids from
 * {@code pg_current_xact_id()}, OIDs from {@code pg_class} and {@code pg_type}).
 *
 * <p>A capture comes from a live server ({@link PgOutputLiveCaptures}) or from a golden fixture
 * ({@link #fromFixture}); the checks in {@link PgOutputScenarioChecks} cannot tell them apart.
 *
 * <p>Fixture format, one file per capture: comment lines first (the first names the server and the
 * exact peek call; then {@code # major}, {@code # scenario}, {@code # option name value} and
 * {@code # fact name value} lines), then one line per message: {@code <lsn> <xid> <data as hex>}.
 *
 * @param serverVersion {@code server_version} of the server, such as {@code 16.9}
 * @param options the peek options: {@code proto_version} and {@code publication_names} first, then by name
 * @param facts what the scenario read from the server, by name ({@code xid.*} names are transaction ids)
 */
record PgOutputCapture(String scenario, int major, String serverVersion, Map<String, String> options,
        Map<String, Long> facts, List<Row> rows) {

    /** One row of {@code pg_logical_slot_peek_binary_changes}: the write position, the transaction, one message. */
    record Row(Lsn lsn, long xid, byte[] data) {
    }

    /**
     * One decoded row.
     *
     * @param index the row number, from 0
     * @param inStreamAfter {@link PgOutputDecoder#inStream()} right after decoding this message
     */
    record Decoded(int index, Row row, PgOutputMessage message, boolean inStreamAfter) {

        MessageType type() {
            return message.messageType();
        }

        <M extends PgOutputMessage> M as(Class<M> type) {
            if (!type.isInstance(message)) {
                throw new AssertionError("row " + index + " is " + message + ", expected a " + type.getSimpleName());
            }
            return type.cast(message);
        }
    }

    PgOutputCapture {
        options = orderedCopy(options);
        facts = Map.copyOf(facts);
        rows = List.copyOf(rows);
    }

    private static Map<String, String> orderedCopy(Map<String, String> options) {
        // proto_version and publication_names first, as in the call; the rest by name.
        Map<String, String> ordered = new LinkedHashMap<>();
        for (String first : List.of("proto_version", "publication_names")) {
            if (options.containsKey(first)) {
                ordered.put(first, options.get(first));
            }
        }
        new TreeSet<>(options.keySet()).forEach(k -> ordered.putIfAbsent(k, options.get(k)));
        return Collections.unmodifiableMap(ordered);
    }

    /** The {@code proto_version} option. */
    int protocol() {
        return Integer.parseInt(options.get("proto_version"));
    }

    /** Whether the call passed this option with this value. */
    boolean option(String name, String value) {
        return value.equals(options.get(name));
    }

    /** A fact the scenario recorded; fails the test when it is missing. */
    long fact(String name) {
        Long value = facts.get(name);
        if (value == null) {
            throw new AssertionError(describe() + ": no fact '" + name + "' (have " + facts.keySet() + ")");
        }
        return value;
    }

    /** {@code PostgreSQL 16.9, protocol 3, scenario dml}, for failure messages. */
    String describe() {
        return "PostgreSQL " + serverVersion + ", protocol " + protocol() + ", scenario " + scenario;
    }

    /** The transaction ids the scenario recorded ({@code xid.*} facts). */
    Set<Long> knownXids() {
        return facts.entrySet().stream().filter(e -> e.getKey().startsWith("xid.")).map(Map.Entry::getValue)
                .collect(Collectors.toSet());
    }

    /** Every row decoded in order by one fresh {@link PgOutputDecoder}, as a replication connection would. */
    List<Decoded> decodeAll() {
        PgOutputDecoder decoder = new PgOutputDecoder();
        List<Decoded> decoded = new ArrayList<>(rows.size());
        for (int i = 0; i < rows.size(); i++) {
            Row row = rows.get(i);
            PgOutputMessage message;
            try {
                message = decoder.decode(ByteBuffer.wrap(row.data()));
            } catch (PgOutputException e) {
                throw new AssertionError(describe() + ": row " + i + " (" + HexFormat.of().formatHex(row.data())
                        + ") does not decode: " + e.getMessage(), e);
            }
            decoded.add(new Decoded(i, row, message, decoder.inStream()));
        }
        return decoded;
    }

    /**
     * The decoded rows without PostgreSQL 14's empty Begin/Commit pairs of transactions the scenario
     * did not record: 14 sends one for every transaction it decodes, including autovacuum's and those
     * of other databases, which a test cannot predict. Pairs of recorded transactions stay.
     */
    List<Decoded> messages() {
        List<Decoded> all = decodeAll();
        if (major != 14) {
            return all;
        }
        Set<Long> known = knownXids();
        List<Decoded> kept = new ArrayList<>(all.size());
        for (int i = 0; i < all.size(); i++) {
            Decoded d = all.get(i);
            if (d.type() == MessageType.BEGIN && i + 1 < all.size() && all.get(i + 1).type() == MessageType.COMMIT
                    && !known.contains(d.as(PgOutputMessage.Begin.class).xid())) {
                i++;
                continue;
            }
            kept.add(d);
        }
        return kept;
    }

    // --- golden fixture format ---

    /** {@code pg16-proto3-dml.hex}. */
    String fixtureName() {
        return fixtureName(major, protocol(), scenario);
    }

    static String fixtureName(int major, int protocol, String scenario) {
        return "pg" + major + "-proto" + protocol + "-" + scenario + ".hex";
    }

    /** The call that produced the rows, as SQL. */
    String peekCall() {
        StringBuilder sql = new StringBuilder("pg_logical_slot_peek_binary_changes(slot, NULL, NULL");
        options.forEach((k, v) -> sql.append(", '").append(k).append("', '").append(v).append('\''));
        return sql.append(')').toString();
    }

    String toFixture() {
        StringBuilder out = new StringBuilder();
        out.append("# PostgreSQL ").append(serverVersion).append(": ").append(peekCall()).append('\n');
        out.append("# regenerate: mvn test -Dtest=GoldenFixtureCapture -Dpgoutput.capture=true\n");
        out.append("# major ").append(major).append('\n');
        out.append("# server ").append(serverVersion).append('\n');
        out.append("# scenario ").append(scenario).append('\n');
        options.forEach((k, v) -> out.append("# option ").append(k).append(' ').append(v).append('\n'));
        new TreeSet<>(facts.keySet()).forEach(k -> out.append("# fact ").append(k).append(' ').append(facts.get(k))
                .append('\n'));
        out.append("# rows: lsn xid data (the columns of the peek, data in hex)\n");
        HexFormat hex = HexFormat.of();
        for (Row row : rows) {
            out.append(row.lsn()).append(' ').append(row.xid()).append(' ').append(hex.formatHex(row.data()))
                    .append('\n');
        }
        return out.toString();
    }

    static PgOutputCapture fromFixture(String fileName, String text) {
        String scenario = null;
        String server = null;
        Integer major = null;
        Map<String, String> options = new LinkedHashMap<>();
        Map<String, Long> facts = new LinkedHashMap<>();
        List<Row> rows = new ArrayList<>();
        HexFormat hex = HexFormat.of();
        int lineNumber = 0;
        for (String line : text.split("\n", -1)) {
            lineNumber++;
            if (line.isBlank()) {
                continue;
            }
            try {
                if (line.startsWith("# ")) {
                    String[] parts = line.substring(2).split(" ", 3);
                    switch (parts[0]) {
                        case "major" -> major = Integer.valueOf(parts[1]);
                        case "server" -> server = parts[1];
                        case "scenario" -> scenario = parts[1];
                        case "option" -> options.put(parts[1], parts.length > 2 ? parts[2] : "");
                        case "fact" -> facts.put(parts[1], Long.valueOf(parts[2]));
                        default -> {
                            // a comment
                        }
                    }
                    continue;
                }
                String[] parts = line.split(" ");
                if (parts.length != 3) {
                    throw new IllegalArgumentException("expected '<lsn> <xid> <hex>'");
                }
                rows.add(new Row(Lsn.parse(parts[0]), Long.parseLong(parts[1]), hex.parseHex(parts[2])));
            } catch (RuntimeException e) {
                throw new IllegalArgumentException(fileName + ":" + lineNumber + ": " + e.getMessage(), e);
            }
        }
        Objects.requireNonNull(scenario, fileName + ": no '# scenario' line");
        Objects.requireNonNull(server, fileName + ": no '# server' line");
        Objects.requireNonNull(major, fileName + ": no '# major' line");
        return new PgOutputCapture(scenario, major, server, options, facts, rows);
    }
}
