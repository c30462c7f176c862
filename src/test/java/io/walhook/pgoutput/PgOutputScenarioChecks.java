package io.walhook.pgoutput;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.walhook.pgoutput.PgOutputCapture.Decoded;
import io.walhook.pgoutput.PgOutputMessage.Begin;
import io.walhook.pgoutput.PgOutputMessage.BeginPrepare;
import io.walhook.pgoutput.PgOutputMessage.Commit;
import io.walhook.pgoutput.PgOutputMessage.CommitPrepared;
import io.walhook.pgoutput.PgOutputMessage.Delete;
import io.walhook.pgoutput.PgOutputMessage.Insert;
import io.walhook.pgoutput.PgOutputMessage.LogicalMessage;
import io.walhook.pgoutput.PgOutputMessage.Origin;
import io.walhook.pgoutput.PgOutputMessage.Prepare;
import io.walhook.pgoutput.PgOutputMessage.Relation;
import io.walhook.pgoutput.PgOutputMessage.Relation.Column;
import io.walhook.pgoutput.PgOutputMessage.RollbackPrepared;
import io.walhook.pgoutput.PgOutputMessage.StreamAbort;
import io.walhook.pgoutput.PgOutputMessage.StreamCommit;
import io.walhook.pgoutput.PgOutputMessage.StreamPrepare;
import io.walhook.pgoutput.PgOutputMessage.StreamStart;
import io.walhook.pgoutput.PgOutputMessage.Truncate;
import io.walhook.pgoutput.PgOutputMessage.Type;
import io.walhook.pgoutput.PgOutputMessage.Update;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import java.util.stream.IntStream;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * What the bytes of each {@link PgOutputScenario} must decode to, checked message by message and
 * field by field against what the scenario's SQL did. Subclasses supply the captures: from live
 * servers ({@link PgOutputConformanceTest}) or from the golden fixtures ({@link PgOutputGoldenTest}).
 *
 * <p>Each test runs once per major version and checks every capture of its scenario (one per
 * protocol version); a failure names the server version and protocol. Transaction ids and OIDs
 * are compared with the facts the scenario read from the server; LSNs, which differ from run to
 * run, only with each other ({@link #assertProtocolInvariants}).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class PgOutputScenarioChecks {

    static final long BOOL = 16;
    static final long BYTEA = 17;
    static final long INT8 = 20;
    static final long INT4 = 23;
    static final long TEXT = 25;
    static final long FLOAT8 = 701;
    static final long VARCHAR = 1043;
    static final long DATE = 1082;
    static final long NUMERIC = 1700;
    static final long INT4_ARRAY = 1007;

    /** Expected column {@code 'u'} in {@link #assertTuple}. */
    static final Object UNCHANGED = new Object() {
        @Override
        public String toString() {
            return "u";
        }
    };

    /** Expected column {@code 'b'} in {@link #assertTuple}. */
    record Bin(String hex) {
    }

    /** The captures of a scenario on one major version, one per protocol version covered. */
    protected abstract List<PgOutputCapture> captures(PgOutputScenario scenario, int major);

    /** The major versions to check: all, or those of {@code -Dpgoutput.majors=16,17} while working on one. */
    static IntStream majors() {
        String only = System.getProperty("pgoutput.majors", "");
        if (only.isBlank()) {
            return IntStream.of(PgOutputLiveCaptures.MAJORS);
        }
        return Arrays.stream(only.split(",")).mapToInt(m -> Integer.parseInt(m.trim()));
    }

    /** Runs {@code check} on every capture of the scenario, naming the server and protocol on failure. */
    void forEachCapture(PgOutputScenario scenario, int major, Consumer<PgOutputCapture> check) {
        List<PgOutputCapture> captures = captures(scenario, major);
        assertThat(captures).as("captures of %s on PostgreSQL %d", scenario.id(), major).isNotEmpty();
        for (PgOutputCapture capture : captures) {
            try {
                check.accept(capture);
            } catch (AssertionError e) {
                throw new AssertionError(capture.describe() + ": " + e.getMessage(), e);
            }
        }
    }

    // ------------------------------------------------------------------------------------------
    // Every capture
    // ------------------------------------------------------------------------------------------

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void everyMessageKeepsTheLsnXidAndStreamInvariants(int major) {
        for (PgOutputScenario scenario : PgOutputScenario.values()) {
            forEachCapture(scenario, major, PgOutputScenarioChecks::assertProtocolInvariants);
        }
    }

    // ------------------------------------------------------------------------------------------
    // Parsing: types, names, values, many columns
    // ------------------------------------------------------------------------------------------

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void userTypesArriveAsTypeMessagesBeforeTheirRelation(int major) {
        forEachCapture(PgOutputScenario.TYPES, major, c -> {
            List<Decoded> tx = transaction(c, "insert");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.TYPE, MessageType.TYPE,
                    MessageType.TYPE, MessageType.TYPE, MessageType.TYPE, MessageType.RELATION, MessageType.INSERT,
                    MessageType.COMMIT);
            // A domain's Type message carries the domain's OID with its base type's schema and name.
            assertThat(tx.get(1).as(Type.class)).isEqualTo(new Type(null, c.fact("type.posint"), "", "int4"));
            assertThat(tx.get(1).as(Type.class).effectiveNamespace()).isEqualTo("pg_catalog");
            assertThat(tx.get(2).as(Type.class)).isEqualTo(new Type(null, c.fact("type.mood"), "public", "mood"));
            assertThat(tx.get(3).as(Type.class)).isEqualTo(new Type(null, c.fact("type.pair"), "public", "pair"));
            assertThat(tx.get(4).as(Type.class))
                    .isEqualTo(new Type(null, c.fact("type.moodArray"), "public", "_mood"));
            assertThat(tx.get(5).as(Type.class)).isEqualTo(new Type(null, c.fact("type.hstore"), "public", "hstore"));
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void relationCarriesUtf8NamesTypeOidsAndModifiers(int major) {
        forEachCapture(PgOutputScenario.TYPES, major, c -> {
            Relation relation = transaction(c, "insert").get(6).as(Relation.class);
            assertRelation(relation, c.fact("oid.table"), "public", "ünïcødé_表", ReplicaIdentity.DEFAULT,
                    new Column(true, "id", INT4, -1),
                    new Column(false, "naïve_列", TEXT, -1),
                    // the column's type is the domain itself, not its base type
                    new Column(false, "d", c.fact("type.posint"), -1),
                    new Column(false, "m", c.fact("type.mood"), -1),
                    new Column(false, "p", c.fact("type.pair"), -1),
                    new Column(false, "ms", c.fact("type.moodArray"), -1),
                    new Column(false, "h", c.fact("type.hstore"), -1),
                    new Column(false, "vc", VARCHAR, 10 + 4),
                    new Column(false, "nm", NUMERIC, (10 << 16 | 2) + 4),
                    new Column(false, "e", TEXT, -1),
                    new Column(false, "z", TEXT, -1));
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void emptyTextIsAZeroLengthValueNotNull(int major) {
        forEachCapture(PgOutputScenario.TYPES, major, c -> {
            Insert insert = transaction(c, "insert").get(7).as(Insert.class);
            assertThat(insert.xid()).isNull();
            assertThat(insert.relationId()).isEqualTo(c.fact("oid.table"));
            assertTuple(insert.newTuple(), "1", "é", "5", "happy", "(1,x)", "{happy,sad}", "\"a\"=>\"1\"", "abc",
                    "12.50", "", null);
            assertThat(insert.newTuple().kind(9)).isEqualTo(ColumnKind.TEXT);
            assertThat(insert.newTuple().length(9)).isZero();
            assertThat(insert.newTuple().kind(10)).isEqualTo(ColumnKind.NULL);
            assertThat(insert.newTuple().length(1)).isEqualTo("é".getBytes(StandardCharsets.UTF_8).length);
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void relationWith1600ColumnsKeepsEveryColumn(int major) {
        forEachCapture(PgOutputScenario.WIDE, major, c -> {
            List<Decoded> tx = transaction(c, "insert");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.COMMIT);
            Relation relation = tx.get(1).as(Relation.class);
            List<Column> expected = new ArrayList<>();
            for (int i = 1; i <= PgOutputScenario.WIDE_COLUMNS; i++) {
                expected.add(new Column(false, "c" + i, INT4, -1));
            }
            assertThat(relation.relationId()).isEqualTo(c.fact("oid.wide"));
            assertThat(relation.relationName()).isEqualTo("wide");
            assertThat(relation.columns()).isEqualTo(expected);
            Insert insert = tx.get(2).as(Insert.class);
            Object[] values = new Object[PgOutputScenario.WIDE_COLUMNS];
            for (int i = 1; i <= values.length; i++) {
                values[i - 1] = PgOutputScenario.wideColumnHasValue(i) ? Integer.toString(i) : null;
            }
            assertTuple(insert.newTuple(), values);
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void binaryModeSendsEachTypesSendFormat(int major) {
        forEachCapture(PgOutputScenario.BINARY, major, c -> {
            assertThat(c.option("binary", "true")).isTrue();
            List<Decoded> tx = transaction(c, "insert");
            // user types first, in column order: the enum, the composite, the domain (as int4)
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.TYPE, MessageType.TYPE,
                    MessageType.TYPE, MessageType.RELATION, MessageType.INSERT, MessageType.COMMIT);
            assertThat(tx.get(1).as(Type.class)).isEqualTo(new Type(null, c.fact("type.mood"), "public", "mood"));
            assertThat(tx.get(2).as(Type.class)).isEqualTo(new Type(null, c.fact("type.pair"), "public", "pair"));
            assertThat(tx.get(3).as(Type.class)).isEqualTo(new Type(null, c.fact("type.posint"), "", "int4"));
            assertRelation(tx.get(4).as(Relation.class), c.fact("oid.values"), "public", "binary_values",
                    ReplicaIdentity.DEFAULT, new Column(true, "id", INT4, -1), new Column(false, "big", INT8, -1),
                    new Column(false, "flag", BOOL, -1), new Column(false, "label", TEXT, -1),
                    new Column(false, "empty", TEXT, -1), new Column(false, "missing", INT4, -1),
                    new Column(false, "raw", BYTEA, -1), new Column(false, "ints", INT4_ARRAY, -1),
                    new Column(false, "m", c.fact("type.mood"), -1), new Column(false, "p", c.fact("type.pair"), -1),
                    new Column(false, "d", c.fact("type.posint"), -1), new Column(false, "f", FLOAT8, -1),
                    new Column(false, "day", DATE, -1));
            Insert insert = tx.get(5).as(Insert.class);
            assertThat(insert.relationId()).isEqualTo(c.fact("oid.values"));
            assertTuple(insert.newTuple(),
                    new Bin("0000002a"),                    // int4 42
                    new Bin("0000000218711a00"),            // int8 9000000000
                    new Bin("01"),                          // bool true
                    new Bin("68c3a96c6c6f"),                // text 'héllo' in UTF-8
                    new Bin(""),                            // text '': 'b' of length 0
                    null,                                   // NULL stays 'n'
                    new Bin("00ff"),                        // bytea
                    // int4[] {1,2}: ndim 1, no nulls, element type 23, length 2, lower bound 1, then length+value
                    new Bin("00000001" + "00000000" + "00000017" + "00000002" + "00000001"
                            + "00000004" + "00000001" + "00000004" + "00000002"),
                    new Bin("6861707079"),                  // enum: its label
                    // record (7,x): 2 columns, each type OID, length, value
                    new Bin("00000002" + "00000017" + "00000004" + "00000007" + "00000019" + "00000001" + "78"),
                    new Bin("00000005"),                    // domain over int4: int4's format
                    new Bin("3ff8000000000000"),            // float8 1.5
                    new Bin("00000001"));                   // date 2000-01-02: days since 2000-01-01
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void textValuesComeFromTheOutputFunctionsUnderThePeekingSessionsSettings(int major) {
        forEachCapture(PgOutputScenario.TEXT_VALUES, major, c -> {
            List<Decoded> tx = transaction(c, "insert");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.COMMIT);
            assertTuple(tx.get(2).as(Insert.class).newTuple(),
                    "1", "NaN", "Infinity", "-Infinity", "12345678901234567890.0123456789",
                    "NaN", "Infinity", "-Infinity", "-0", "0.1",
                    "infinity", "-infinity", "0044-03-15 BC",
                    "2024-06-01 16:00:00+00",               // written at 12:00 New York time, read in UTC
                    "1 year 2 mons 3 days 04:05:06.789",
                    "{1,NULL,3}", "{\"NULL\",NULL,\"a b\"}", "{}", "{{1,2},{3,4}}", "[0:1]={5,6}",
                    "[1,5)", "{[1,3),[5,7)}",
                    "{\"a\": [true, null, \"é\"], \"b\": 1}",
                    "<a x=\"1\">t</a>", "$12.34", "\\x00ff", "t",
                    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "04:05:06.5", "ab ", "101", "192.168.0.1/24");
        });
    }

    // ------------------------------------------------------------------------------------------
    // Changes and replica identity
    // ------------------------------------------------------------------------------------------

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void multiRowInsertSendsOneInsertPerRowAfterOneRelation(int major) {
        forEachCapture(PgOutputScenario.DML, major, c -> {
            List<Decoded> tx = transaction(c, "insert");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.INSERT, MessageType.INSERT, MessageType.COMMIT);
            assertThat(tx.get(0).as(Begin.class).xid()).isEqualTo(c.fact("xid.insert"));
            assertRelation(tx.get(1).as(Relation.class), c.fact("oid.accounts"), "public", "accounts",
                    ReplicaIdentity.DEFAULT, new Column(true, "id", INT4, -1), new Column(false, "owner", TEXT, -1),
                    new Column(false, "balance", NUMERIC, (12 << 16 | 2) + 4));
            assertInsert(tx.get(2), c.fact("oid.accounts"), "1", "ann", "10.50");
            assertInsert(tx.get(3), c.fact("oid.accounts"), "2", "bob", null);
            assertInsert(tx.get(4), c.fact("oid.accounts"), "3", "", "0.00");
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void copiedRowsShareOneLsn(int major) {
        forEachCapture(PgOutputScenario.DML, major, c -> {
            List<Decoded> tx = transaction(c, "copy");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.INSERT, MessageType.INSERT,
                    MessageType.INSERT, MessageType.COMMIT);
            assertInsert(tx.get(1), c.fact("oid.accounts"), "4", "cy", "1.00");
            assertInsert(tx.get(2), c.fact("oid.accounts"), "5", "dee", "2.00");
            assertInsert(tx.get(3), c.fact("oid.accounts"), "6", null, "3.00");
            // COPY writes one multi-insert WAL record: its changes share its LSN
            assertThat(tx.get(2).row().lsn()).isEqualTo(tx.get(1).row().lsn());
            assertThat(tx.get(3).row().lsn()).isEqualTo(tx.get(1).row().lsn());
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void updateWithoutKeyChangeHasNoOldTuple(int major) {
        forEachCapture(PgOutputScenario.DML, major, c -> {
            List<Decoded> tx = transaction(c, "update");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.UPDATE, MessageType.COMMIT);
            Update update = tx.get(1).as(Update.class);
            assertThat(update.relationId()).isEqualTo(c.fact("oid.accounts"));
            assertThat(update.keyTuple()).isNull();
            assertThat(update.oldTuple()).isNull();
            assertTuple(update.newTuple(), "1", "ann", "11.00");
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void updateOfTheKeyCarriesAKeyTupleWithOtherColumnsAsN(int major) {
        forEachCapture(PgOutputScenario.DML, major, c -> {
            List<Decoded> tx = transaction(c, "updateKey");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.UPDATE, MessageType.COMMIT);
            Update update = tx.get(1).as(Update.class);
            assertThat(update.oldTuple()).isNull();
            assertTuple(update.keyTuple(), "2", null, null);
            assertTuple(update.newTuple(), "20", "bob", null);
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void deleteCarriesTheKeyTuple(int major) {
        forEachCapture(PgOutputScenario.DML, major, c -> {
            List<Decoded> tx = transaction(c, "delete");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.DELETE, MessageType.COMMIT);
            Delete delete = tx.get(1).as(Delete.class);
            assertThat(delete.relationId()).isEqualTo(c.fact("oid.accounts"));
            assertThat(delete.oldTuple()).isNull();
            assertTuple(delete.keyTuple(), "3", null, null);
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void upsertArrivesAsUpdateOfTheExistingRowAndInsertOfTheNewOne(int major) {
        forEachCapture(PgOutputScenario.DML, major, c -> {
            List<Decoded> tx = transaction(c, "upsert");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.UPDATE, MessageType.INSERT,
                    MessageType.COMMIT);
            Update update = tx.get(1).as(Update.class);
            assertThat(update.keyTuple()).isNull();
            assertTuple(update.newTuple(), "1", "ann", "99.00");
            assertInsert(tx.get(2), c.fact("oid.accounts"), "7", "eve", "7.00");
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void rowsOfARolledBackSavepointAreAbsent(int major) {
        forEachCapture(PgOutputScenario.DML, major, c -> {
            List<Decoded> tx = transaction(c, "savepoint");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.INSERT, MessageType.INSERT,
                    MessageType.COMMIT);
            assertInsert(tx.get(1), c.fact("oid.accounts"), "30", "kept", "1.00");
            assertInsert(tx.get(2), c.fact("oid.accounts"), "32", "kept too", "3.00");
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void fullIdentityFlagsEveryColumnAsKeyAndSendsTheWholeOldRow(int major) {
        forEachCapture(PgOutputScenario.IDENTITY, major, c -> {
            List<Decoded> tx = transaction(c, "full");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.UPDATE, MessageType.DELETE, MessageType.COMMIT);
            assertRelation(tx.get(1).as(Relation.class), c.fact("oid.full"), "public", "ident_full",
                    ReplicaIdentity.FULL, new Column(true, "id", INT4, -1), new Column(true, "v", TEXT, -1));
            assertInsert(tx.get(2), c.fact("oid.full"), "1", "a");
            Update update = tx.get(3).as(Update.class);
            assertThat(update.keyTuple()).isNull();
            assertTuple(update.oldTuple(), "1", "a");
            assertTuple(update.newTuple(), "1", "b");
            Delete delete = tx.get(4).as(Delete.class);
            assertThat(delete.keyTuple()).isNull();
            assertTuple(delete.oldTuple(), "1", "b");
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void indexIdentityKeysOnlyTheIndexedColumns(int major) {
        forEachCapture(PgOutputScenario.IDENTITY, major, c -> {
            List<Decoded> tx = transaction(c, "index");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.UPDATE, MessageType.UPDATE, MessageType.DELETE, MessageType.COMMIT);
            assertRelation(tx.get(1).as(Relation.class), c.fact("oid.index"), "public", "ident_index",
                    ReplicaIdentity.INDEX, new Column(false, "id", INT4, -1), new Column(true, "code", TEXT, -1),
                    new Column(false, "v", TEXT, -1));
            assertInsert(tx.get(2), c.fact("oid.index"), "1", "c1", "x");
            Update untouchedKey = tx.get(3).as(Update.class);
            assertThat(untouchedKey.keyTuple()).isNull();
            assertThat(untouchedKey.oldTuple()).isNull();
            assertTuple(untouchedKey.newTuple(), "1", "c1", "y");
            Update changedKey = tx.get(4).as(Update.class);
            assertTuple(changedKey.keyTuple(), null, "c1", null);
            assertTuple(changedKey.newTuple(), "1", "c2", "y");
            assertTuple(tx.get(5).as(Delete.class).keyTuple(), null, "c2", null);
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void nothingIdentityFlagsNoKeyColumn(int major) {
        forEachCapture(PgOutputScenario.IDENTITY, major, c -> {
            // The update and delete are not published (the publication is insert-only: PostgreSQL
            // refuses UPDATE on a NOTHING table whose updates are published).
            List<Decoded> tx = transaction(c, "nothing");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.COMMIT);
            assertRelation(tx.get(1).as(Relation.class), c.fact("oid.nothing"), "public", "ident_nothing",
                    ReplicaIdentity.NOTHING, new Column(false, "id", INT4, -1), new Column(false, "v", TEXT, -1));
            assertInsert(tx.get(2), c.fact("oid.nothing"), "1", "x");
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void unchangedToastIsMarkedU(int major) {
        forEachCapture(PgOutputScenario.TOAST, major, c -> {
            List<Decoded> insert = transaction(c, "insertDefault");
            assertThat(types(insert)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.COMMIT);
            assertInsert(insert.get(2), c.fact("oid.default"), "1", toastedValue(), "a");

            List<Decoded> update = transaction(c, "updateDefault");
            assertThat(types(update)).containsExactly(MessageType.BEGIN, MessageType.UPDATE, MessageType.COMMIT);
            Update u = update.get(1).as(Update.class);
            assertThat(u.keyTuple()).isNull();
            assertThat(u.oldTuple()).isNull();
            assertTuple(u.newTuple(), "1", UNCHANGED, "b");
            assertThat(u.newTuple().isUnchangedToast(1)).isTrue();
            assertThat(u.newTuple().isNull(1)).isFalse();

            List<Decoded> delete = transaction(c, "deleteDefault");
            assertThat(types(delete)).containsExactly(MessageType.BEGIN, MessageType.DELETE, MessageType.COMMIT);
            assertTuple(delete.get(1).as(Delete.class).keyTuple(), "1", null, null);
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void fullIdentityOldRowCarriesTheDetoastedValue(int major) {
        forEachCapture(PgOutputScenario.TOAST, major, c -> {
            List<Decoded> update = transaction(c, "updateFull");
            assertThat(types(update)).containsExactly(MessageType.BEGIN, MessageType.UPDATE, MessageType.COMMIT);
            Update u = update.get(1).as(Update.class);
            assertThat(u.relationId()).isEqualTo(c.fact("oid.full"));
            assertThat(u.keyTuple()).isNull();
            assertTuple(u.oldTuple(), "1", toastedValue(), "a");
            // the new row still points at the stored value: 'u', to be filled from the old row
            assertTuple(u.newTuple(), "1", UNCHANGED, "b");

            List<Decoded> delete = transaction(c, "deleteFull");
            assertThat(types(delete)).containsExactly(MessageType.BEGIN, MessageType.DELETE, MessageType.COMMIT);
            assertTuple(delete.get(1).as(Delete.class).oldTuple(), "1", toastedValue(), "b");
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void keyStoredOutOfLineIsSentInTheKeyTupleEvenWhenUnchanged(int major) {
        forEachCapture(PgOutputScenario.TOAST, major, c -> {
            List<Decoded> insert = transaction(c, "insertKey");
            assertThat(types(insert)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.COMMIT);
            assertRelation(insert.get(1).as(Relation.class), c.fact("oid.key"), "public", "toast_key",
                    ReplicaIdentity.DEFAULT, new Column(true, "k", TEXT, -1), new Column(false, "v", INT4, -1));
            List<Decoded> update = transaction(c, "updateKey");
            assertThat(types(update)).containsExactly(MessageType.BEGIN, MessageType.UPDATE, MessageType.COMMIT);
            Update u = update.get(1).as(Update.class);
            assertTuple(u.keyTuple(), toastedValue(), null);
            assertTuple(u.newTuple(), UNCHANGED, "2");
        });
    }

    // ------------------------------------------------------------------------------------------
    // Truncate and schema changes
    // ------------------------------------------------------------------------------------------

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void truncateListsThePublishedTablesWithItsOptions(int major) {
        forEachCapture(PgOutputScenario.TRUNCATE, major, c -> {
            assertTruncate(c, "one", false, false, "a");
            assertTruncate(c, "several", false, false, "a", "b");
            assertTruncate(c, "cascade", true, false, "parent", "child");
            assertTruncate(c, "restartIdentity", false, true, "seq");
            // trunc_unpublished was truncated too, but is not in the publication
            assertTruncate(c, "withUnpublished", false, false, "b");
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void columnAddedOrDroppedMidTransactionResendsTheRelation(int major) {
        forEachCapture(PgOutputScenario.SCHEMA, major, c -> {
            List<Decoded> tx = transaction(c, "evolve");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.RELATION, MessageType.INSERT, MessageType.RELATION, MessageType.INSERT,
                    MessageType.COMMIT);
            long oid = c.fact("oid.evolving");
            Column id = new Column(true, "id", INT4, -1);
            assertRelation(tx.get(1).as(Relation.class), oid, "public", "evolving", ReplicaIdentity.DEFAULT, id,
                    new Column(false, "v", TEXT, -1));
            assertInsert(tx.get(2), oid, "1", "a");
            assertRelation(tx.get(3).as(Relation.class), oid, "public", "evolving", ReplicaIdentity.DEFAULT, id,
                    new Column(false, "v", TEXT, -1), new Column(false, "w", INT4, -1));
            assertInsert(tx.get(4), oid, "2", "b", "8");
            assertRelation(tx.get(5).as(Relation.class), oid, "public", "evolving", ReplicaIdentity.DEFAULT, id,
                    new Column(false, "w", INT4, -1));
            assertInsert(tx.get(6), oid, "3", "9");
        });
    }

    // ------------------------------------------------------------------------------------------
    // Transactions: empty ones, messages, origins
    // ------------------------------------------------------------------------------------------

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void transactionsWithNothingPublishedAreEmptyPairsOnlyOnPostgres14(int major) {
        forEachCapture(PgOutputScenario.EMPTY, major, c -> {
            List<Decoded> all = c.messages();
            List<Decoded> published = transaction(c, "published");
            assertThat(types(published)).containsExactly(MessageType.BEGIN, MessageType.RELATION,
                    MessageType.INSERT, MessageType.COMMIT);
            assertRelation(published.get(1).as(Relation.class), c.fact("oid.published"), "public", "quiet_published",
                    ReplicaIdentity.DEFAULT, new Column(true, "id", INT4, -1), new Column(false, "note", TEXT, -1));
            assertInsert(published.get(2), c.fact("oid.published"), "1", "x");
            if (c.major() == 14) {
                assertThat(types(all)).containsExactly(MessageType.BEGIN, MessageType.COMMIT, MessageType.BEGIN,
                        MessageType.COMMIT, MessageType.BEGIN, MessageType.COMMIT, MessageType.BEGIN,
                        MessageType.RELATION, MessageType.INSERT, MessageType.COMMIT);
                assertThat(types(transaction(c, "unpublished"))).containsExactly(MessageType.BEGIN, MessageType.COMMIT);
                assertThat(types(transaction(c, "ddl"))).containsExactly(MessageType.BEGIN, MessageType.COMMIT);
                assertThat(types(transaction(c, "ddlOnPublished"))).containsExactly(MessageType.BEGIN,
                        MessageType.COMMIT);
            } else {
                assertThat(all).hasSize(4);
            }
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void transactionalMessagesArriveInsideTheirTransaction(int major) {
        forEachCapture(PgOutputScenario.MESSAGES, major, c -> {
            List<Decoded> tx = transaction(c, "committed");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.MESSAGE, MessageType.MESSAGE, MessageType.MESSAGE, MessageType.COMMIT);
            assertInsert(tx.get(2), c.fact("oid.notes"), "1");
            assertMessage(tx.get(3), true, "walhook.text", "inside ✓".getBytes(StandardCharsets.UTF_8));
            // content need not be text: not valid UTF-8
            assertMessage(tx.get(4), true, "walhook.bytes", HexFormat.of().parseHex("00ff80fe"));
            assertMessage(tx.get(5), true, "walhook.empty", new byte[0]);
            // a message's LSN is the end of its WAL record, so the last can meet the commit record
            Lsn commitLsn = tx.get(6).as(Commit.class).commitLsn();
            for (int i = 3; i <= 5; i++) {
                assertThat(tx.get(i).as(LogicalMessage.class).lsn()).isLessThanOrEqualTo(commitLsn);
            }
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void nonTransactionalMessagesAreSentAtOnceEvenWhenTheirTransactionRollsBack(int major) {
        forEachCapture(PgOutputScenario.MESSAGES, major, c -> {
            List<Decoded> all = c.messages();
            assertThat(types(all)).containsExactly(MessageType.MESSAGE, MessageType.MESSAGE, MessageType.BEGIN,
                    MessageType.RELATION, MessageType.INSERT, MessageType.MESSAGE, MessageType.MESSAGE,
                    MessageType.MESSAGE, MessageType.COMMIT, MessageType.MESSAGE);
            assertMessage(all.get(0), false, "walhook.outside", "outside".getBytes(StandardCharsets.UTF_8));
            // emitted inside the committed transaction, sent before it
            assertMessage(all.get(1), false, "walhook.early", "before commit".getBytes(StandardCharsets.UTF_8));
            assertThat(all.get(2).as(Begin.class).xid()).isEqualTo(c.fact("xid.committed"));
            // emitted inside the rolled-back transaction: sent; its transactional sibling and insert: not
            assertMessage(all.get(9), false, "walhook.rolledback", "still sent".getBytes(StandardCharsets.UTF_8));
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void originMessageFollowsBeginAndTheCommitTimeIsTheOrigins(int major) {
        forEachCapture(PgOutputScenario.ORIGIN, major, c -> {
            if (c.option("origin", "none")) {
                return; // see originNoneLeavesOutTransactionsFromAnOrigin
            }
            Instant originTime = Instant.parse("2024-01-02T03:04:05.123456Z");
            List<Decoded> replicated = transaction(c, "replicated");
            assertThat(types(replicated)).containsExactly(MessageType.BEGIN, MessageType.ORIGIN,
                    MessageType.RELATION, MessageType.INSERT, MessageType.COMMIT);
            assertThat(replicated.get(0).as(Begin.class).commitTime()).isEqualTo(originTime);
            assertThat(replicated.get(1).as(Origin.class))
                    .isEqualTo(new Origin(Lsn.parse(PgOutputScenario.ORIGIN_LSN), PgOutputScenario.ORIGIN_NAME));
            assertInsert(replicated.get(3), c.fact("oid.replicated"), "1", "from upstream");
            assertThat(replicated.get(4).as(Commit.class).commitTime()).isEqualTo(originTime);

            List<Decoded> local = transaction(c, "local");
            assertThat(types(local)).containsExactly(MessageType.BEGIN, MessageType.INSERT, MessageType.COMMIT);
            assertThat(local.get(0).as(Begin.class).commitTime()).isAfter(originTime);
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void originNoneLeavesOutTransactionsFromAnOrigin(int major) {
        assumeTrue(major >= 16, "the origin option is PostgreSQL 16's");
        forEachCapture(PgOutputScenario.ORIGIN, major, c -> {
            if (!c.option("origin", "none")) {
                return;
            }
            List<Decoded> all = c.messages();
            assertThat(types(all)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.COMMIT);
            assertThat(all.get(0).as(Begin.class).xid()).isEqualTo(c.fact("xid.local"));
            assertInsert(all.get(2), c.fact("oid.replicated"), "2", "local");
        });
        assertThat(captures(PgOutputScenario.ORIGIN, major)).anyMatch(c -> c.option("origin", "none"));
    }

    // ------------------------------------------------------------------------------------------
    // Streaming
    // ------------------------------------------------------------------------------------------

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void streamedTransactionCarriesXidOnEveryChange(int major) {
        forEachCapture(PgOutputScenario.STREAM_COMMIT, major, c -> {
            long xid = c.fact("xid.streamed");
            List<Decoded> changes;
            if (streams(c)) {
                List<List<Decoded>> blocks = blocks(c, xid);
                assertThat(blocks).as("stream blocks").hasSizeGreaterThanOrEqualTo(2);
                for (int i = 0; i < blocks.size(); i++) {
                    StreamStart start = blocks.get(i).get(0).as(StreamStart.class);
                    assertThat(start.firstSegment()).as("first_segment of block %d", i).isEqualTo(i == 0);
                }
                changes = inside(blocks);
                for (Decoded d : changes) {
                    assertThat(streamXid(d.message())).as("[xid] of %s", d.message()).isEqualTo(xid);
                }
                Decoded end = last(c, MessageType.STREAM_COMMIT);
                assertThat(end.as(StreamCommit.class).xid()).isEqualTo(xid);
                assertThat(end.index()).isGreaterThan(lastOf(lastOf(blocks)).index());
                assertThat(types(c.messages())).doesNotContain(MessageType.BEGIN, MessageType.COMMIT);
            } else {
                changes = transaction(c, "streamed");
                assertThat(changes.get(0).as(Begin.class).xid()).isEqualTo(xid);
                changes = changes.subList(1, changes.size() - 1);
                for (Decoded d : changes) {
                    assertThat(streamXid(d.message())).as("[xid] of %s", d.message()).isNull();
                }
            }
            assertStreamCommitChanges(c, changes);
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void decoderKnowsWhenItIsInsideAStreamBlock(int major) {
        forEachCapture(PgOutputScenario.STREAM_COMMIT, major, c -> {
            List<Decoded> all = c.decodeAll();
            boolean inside = false;
            for (Decoded d : all) {
                if (d.type() == MessageType.STREAM_START) {
                    inside = true;
                } else if (d.type() == MessageType.STREAM_STOP) {
                    inside = false;
                }
                assertThat(d.inStreamAfter()).as("inStream() after row %d, %s", d.index(), d.message())
                        .isEqualTo(inside);
            }
            assertThat(all.stream().anyMatch(Decoded::inStreamAfter)).isEqualTo(streams(c));
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void nonTransactionalMessageDuringAStreamIsSentBetweenBlocks(int major) {
        forEachCapture(PgOutputScenario.STREAM_COMMIT, major, c -> {
            List<Decoded> all = c.messages();
            List<Decoded> between = all.stream().filter(d -> d.type() == MessageType.MESSAGE
                    && !d.as(LogicalMessage.class).transactional()).toList();
            assertThat(between).hasSize(1);
            Decoded message = between.get(0);
            assertMessage(message, false, "walhook.between", "between blocks".getBytes(StandardCharsets.UTF_8));
            assertThat(message.as(LogicalMessage.class).xid()).isNull();
            assertThat(message.inStreamAfter()).isFalse();
            if (streams(c)) {
                assertThat(message.index()).isGreaterThan(blocks(c, c.fact("xid.streamed")).get(0).get(0).index())
                        .isLessThan(last(c, MessageType.STREAM_COMMIT).index());
            } else {
                assertThat(all.indexOf(message)).as("before the transaction it was emitted in").isZero();
            }
        });
    }

    /**
     * Decoded after the fact, as a peek does, the transaction is already known to have aborted:
     * 14 to 17 notice it at the first catalog lookup of the stream and cut the block short (here
     * before its first change: an empty stream block), then send the Stream Abort; 18 drops an
     * aborted transaction before streaming it, so nothing is sent. A walsender decoding the
     * transaction while it runs streams its changes first.
     */
    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void abortedStreamedTransactionEndsWithStreamAbortOfItsOwnXid(int major) {
        forEachCapture(PgOutputScenario.STREAM_ABORT, major, c -> {
            long xid = c.fact("xid.aborted");
            List<Decoded> all = c.messages();
            if (!streams(c) || c.major() >= 18) {
                assertThat(all).as("a rolled back transaction is not sent").isEmpty();
                return;
            }
            assertThat(all.get(0).as(StreamStart.class)).isEqualTo(new StreamStart(xid, true));
            assertThat(types(all)).containsExactly(MessageType.STREAM_START, MessageType.STREAM_STOP,
                    MessageType.STREAM_ABORT);
            Decoded end = all.get(all.size() - 1);
            StreamAbort abort = end.as(StreamAbort.class);
            assertThat(abort.xid()).isEqualTo(xid);
            assertThat(abort.subXid()).isEqualTo(xid);
            if (c.option("streaming", "parallel")) {
                assertThat(abort.abortLsn()).isEqualTo(end.row().lsn());
                assertThat(abort.abortTime()).isAfter(Instant.parse("2020-01-01T00:00:00Z"));
            } else {
                assertThat(abort.abortLsn()).isNull();
                assertThat(abort.abortTime()).isNull();
            }
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void subtransactionAbortInAStreamNamesTheSubxid(int major) {
        forEachCapture(PgOutputScenario.STREAM_SUBABORT, major, c -> {
            long top = c.fact("xid.top");
            long sub = c.fact("xid.sub");
            assertThat(sub).isNotEqualTo(top);
            long oid = c.fact("oid.sub");
            if (!streams(c)) {
                List<Decoded> tx = transaction(c, "top");
                assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                        MessageType.INSERT, MessageType.COMMIT);
                assertInsert(tx.get(2), oid, "1", "kept");
                assertInsert(tx.get(3), oid, "3", "kept too");
                return;
            }
            List<List<Decoded>> blocks = blocks(c, top);
            List<Decoded> inserts = inside(blocks).stream().filter(d -> d.type() == MessageType.INSERT).toList();
            assertThat(inserts).hasSize(3);
            assertInsert(inserts.get(0), oid, "1", "kept");
            assertThat(inserts.get(0).as(Insert.class).xid()).isEqualTo(top);
            // the subtransaction's change carries the subtransaction's own xid
            assertInsert(inserts.get(1), oid, "2", "rolled back");
            assertThat(inserts.get(1).as(Insert.class).xid()).isEqualTo(sub);
            assertInsert(inserts.get(2), oid, "3", "kept too");
            assertThat(inserts.get(2).as(Insert.class).xid()).isEqualTo(top);
            for (Decoded d : inside(blocks)) {
                assertThat(streamXid(d.message())).isIn(top, sub);
            }

            List<Decoded> aborts = c.messages().stream().filter(d -> d.type() == MessageType.STREAM_ABORT).toList();
            assertThat(aborts).hasSize(1);
            StreamAbort abort = aborts.get(0).as(StreamAbort.class);
            assertThat(abort.xid()).isEqualTo(top);
            assertThat(abort.subXid()).isEqualTo(sub);
            assertThat(abort.abortLsn() != null).isEqualTo(c.option("streaming", "parallel"));
            // after the block that streamed the subtransaction's row, before the one with the later row
            assertThat(aborts.get(0).index()).isGreaterThan(inserts.get(1).index()).isLessThan(inserts.get(2).index());
            Decoded end = last(c, MessageType.STREAM_COMMIT);
            assertThat(end.as(StreamCommit.class).xid()).isEqualTo(top);
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void interleavedStreamsKeepTheirChangesApartAroundAnOrdinaryTransaction(int major) {
        forEachCapture(PgOutputScenario.STREAM_INTERLEAVED, major, c -> {
            long a = c.fact("xid.a");
            long b = c.fact("xid.b");
            long oid = c.fact("oid.pair");
            List<Decoded> between = transaction(c, "between");
            assertThat(types(between)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                    MessageType.COMMIT);
            assertInsert(between.get(2), oid, "3", "between");
            if (!streams(c)) {
                // without streaming, transactions arrive whole in commit order
                List<Decoded> all = c.messages();
                assertThat(all.get(0).index()).isEqualTo(between.get(0).index());
                List<Decoded> txA = transaction(c, "a");
                List<Decoded> txB = transaction(c, "b");
                assertThat(types(txA)).containsExactly(MessageType.BEGIN, MessageType.INSERT, MessageType.INSERT,
                        MessageType.COMMIT);
                assertInsert(txA.get(1), oid, "1", "a");
                assertInsert(txA.get(2), oid, "4", "a");
                assertThat(txB.get(0).index()).isGreaterThan(txA.get(0).index());
                assertInsert(txB.get(1), oid, "2", "b");
                assertInsert(txB.get(2), oid, "5", "b");
                return;
            }
            List<List<Decoded>> blocksA = blocks(c, a);
            List<List<Decoded>> blocksB = blocks(c, b);
            List<Decoded> insertsA = inside(blocksA).stream().filter(d -> d.type() == MessageType.INSERT).toList();
            List<Decoded> insertsB = inside(blocksB).stream().filter(d -> d.type() == MessageType.INSERT).toList();
            assertThat(insertsA).hasSize(2);
            assertInsert(insertsA.get(0), oid, "1", "a");
            assertInsert(insertsA.get(1), oid, "4", "a");
            assertThat(insertsB).hasSize(2);
            assertInsert(insertsB.get(0), oid, "2", "b");
            assertInsert(insertsB.get(1), oid, "5", "b");
            for (Decoded d : inside(blocksA)) {
                assertThat(streamXid(d.message())).isEqualTo(a);
            }
            for (Decoded d : inside(blocksB)) {
                assertThat(streamXid(d.message())).isEqualTo(b);
            }
            int ordinary = between.get(0).index();
            assertThat(insertsA.get(0).index()).isLessThan(insertsB.get(0).index()).isLessThan(ordinary);
            assertThat(insertsA.get(1).index()).isGreaterThan(ordinary);
            List<Decoded> commits = c.messages().stream().filter(d -> d.type() == MessageType.STREAM_COMMIT).toList();
            assertThat(commits).extracting(d -> d.as(StreamCommit.class).xid()).containsExactly(a, b);
            assertThat(commits.get(0).index()).isGreaterThan(insertsA.get(1).index());
        });
    }

    // ------------------------------------------------------------------------------------------
    // Two-phase commit
    // ------------------------------------------------------------------------------------------

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void preparedTransactionArrivesAtPrepareAndCommitPreparedFollows(int major) {
        forEachCapture(PgOutputScenario.TWO_PHASE, major, c -> {
            long oid = c.fact("oid.orders");
            List<Decoded> all = c.messages();
            if (c.major() == 14) {
                // pgoutput 14 has no two-phase messages: the transaction arrives at COMMIT PREPARED
                assertThat(types(all)).containsExactly(MessageType.BEGIN, MessageType.RELATION, MessageType.INSERT,
                        MessageType.COMMIT, MessageType.BEGIN, MessageType.COMMIT, MessageType.BEGIN,
                        MessageType.INSERT, MessageType.COMMIT);
                assertInsert(transaction(c, "committed").get(2), oid, "1", "committed");
                return;
            }
            // A two-phase slot sends them at every protocol version, with or without the option.
            assertThat(types(all)).containsExactly(
                    MessageType.BEGIN_PREPARE, MessageType.RELATION, MessageType.INSERT, MessageType.PREPARE,
                    MessageType.COMMIT_PREPARED,
                    MessageType.BEGIN_PREPARE, MessageType.INSERT, MessageType.PREPARE, MessageType.ROLLBACK_PREPARED,
                    MessageType.BEGIN_PREPARE, MessageType.PREPARE, MessageType.COMMIT_PREPARED,
                    MessageType.BEGIN_PREPARE, MessageType.INSERT, MessageType.PREPARE, MessageType.COMMIT_PREPARED);
            List<Decoded> tx = transaction(c, "committed");
            BeginPrepare begin = tx.get(0).as(BeginPrepare.class);
            assertThat(begin.gid()).isEqualTo("walhook-commit");
            assertThat(begin.xid()).isEqualTo(c.fact("xid.committed"));
            assertInsert(tx.get(2), oid, "1", "committed");
            Prepare prepare = tx.get(3).as(Prepare.class);
            CommitPrepared commit = all.get(4).as(CommitPrepared.class);
            assertThat(commit.gid()).isEqualTo("walhook-commit");
            assertThat(commit.xid()).isEqualTo(c.fact("xid.committed"));
            assertThat(commit.flags()).isZero();
            assertThat(commit.commitLsn()).isGreaterThanOrEqualTo(prepare.endLsn());
            assertThat(commit.endLsn()).isGreaterThan(commit.commitLsn());
            assertThat(commit.commitTime()).isAfterOrEqualTo(prepare.prepareTime());
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void rollbackPreparedRefersToTheEndOfThePrepare(int major) {
        forEachCapture(PgOutputScenario.TWO_PHASE, major, c -> {
            long xid = c.fact("xid.rolledBack");
            if (c.major() == 14) {
                assertThat(c.messages()).noneMatch(d -> d.row().xid() == xid);
                return;
            }
            List<Decoded> tx = transaction(c, "rolledBack");
            assertThat(types(tx)).containsExactly(MessageType.BEGIN_PREPARE, MessageType.INSERT, MessageType.PREPARE);
            assertInsert(tx.get(1), c.fact("oid.orders"), "2", "rolled back");
            Prepare prepare = tx.get(2).as(Prepare.class);
            assertThat(prepare.gid()).isEqualTo("walhook-rollback");
            Decoded next = c.messages().get(c.messages().indexOf(tx.get(2)) + 1);
            RollbackPrepared rollback = next.as(RollbackPrepared.class);
            assertThat(rollback.gid()).isEqualTo("walhook-rollback");
            assertThat(rollback.xid()).isEqualTo(xid);
            assertThat(rollback.flags()).isZero();
            assertThat(rollback.prepareEndLsn()).isEqualTo(prepare.endLsn());
            assertThat(rollback.prepareTime()).isEqualTo(prepare.prepareTime());
            assertThat(rollback.rollbackEndLsn()).isGreaterThan(rollback.prepareEndLsn());
            assertThat(rollback.rollbackTime()).isAfterOrEqualTo(rollback.prepareTime());
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void preparedTransactionWithoutPublishedChangesIsStillSent(int major) {
        forEachCapture(PgOutputScenario.TWO_PHASE, major, c -> {
            List<Decoded> tx = transaction(c, "unpublished");
            if (c.major() == 14) {
                assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.COMMIT);
                return;
            }
            assertThat(types(tx)).containsExactly(MessageType.BEGIN_PREPARE, MessageType.PREPARE);
            assertThat(tx.get(1).as(Prepare.class).gid()).isEqualTo("walhook-unpublished");
            Decoded next = c.messages().get(c.messages().indexOf(tx.get(1)) + 1);
            assertThat(next.as(CommitPrepared.class).gid()).isEqualTo("walhook-unpublished");
            assertThat(next.as(CommitPrepared.class).xid()).isEqualTo(c.fact("xid.unpublished"));
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void preparedTransactionWithoutAnyChangeIsNotSent(int major) {
        forEachCapture(PgOutputScenario.TWO_PHASE, major, c -> {
            long xid = c.fact("xid.nothing");
            assertThat(c.messages()).noneMatch(d -> d.row().xid() == xid || gid(d.message()).equals("walhook-nothing"));
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void reusedGidArrivesAsASecondPreparedTransaction(int major) {
        forEachCapture(PgOutputScenario.TWO_PHASE, major, c -> {
            List<Decoded> tx = transaction(c, "reused");
            if (c.major() == 14) {
                assertThat(types(tx)).containsExactly(MessageType.BEGIN, MessageType.INSERT, MessageType.COMMIT);
                assertInsert(tx.get(1), c.fact("oid.orders"), "4", "gid reused");
                return;
            }
            assertThat(types(tx)).containsExactly(MessageType.BEGIN_PREPARE, MessageType.INSERT, MessageType.PREPARE);
            assertThat(tx.get(0).as(BeginPrepare.class).gid()).isEqualTo("walhook-commit");
            assertInsert(tx.get(1), c.fact("oid.orders"), "4", "gid reused");
            List<CommitPrepared> commits = c.messages().stream().filter(d -> d.type() == MessageType.COMMIT_PREPARED)
                    .map(d -> d.as(CommitPrepared.class)).filter(k -> k.gid().equals("walhook-commit")).toList();
            assertThat(commits).extracting(CommitPrepared::xid)
                    .containsExactly(c.fact("xid.committed"), c.fact("xid.reused"));
            assertThat(commits.get(1).commitLsn()).isGreaterThan(commits.get(0).endLsn());
        });
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void streamedThenPreparedTransactionEndsWithStreamPrepare(int major) {
        forEachCapture(PgOutputScenario.STREAM_PREPARE, major, c -> {
            long xid = c.fact("xid.prepared");
            long oid = c.fact("oid.orders");
            List<Decoded> all = c.messages();
            if (!streams(c)) {
                List<Decoded> tx = transaction(c, "prepared");
                assertInsert(tx.get(2), oid, "1", "first");
                assertInsert(tx.get(3), oid, "2", "second");
                if (c.major() == 14) {
                    assertThat(types(all)).containsExactly(MessageType.BEGIN, MessageType.RELATION,
                            MessageType.INSERT, MessageType.INSERT, MessageType.COMMIT);
                } else {
                    assertThat(types(all)).containsExactly(MessageType.BEGIN_PREPARE, MessageType.RELATION,
                            MessageType.INSERT, MessageType.INSERT, MessageType.PREPARE, MessageType.COMMIT_PREPARED);
                    assertThat(tx.get(4).as(Prepare.class).gid()).isEqualTo("walhook-streamed");
                }
                return;
            }
            List<List<Decoded>> blocks = blocks(c, xid);
            List<Decoded> inserts = inside(blocks).stream().filter(d -> d.type() == MessageType.INSERT).toList();
            assertThat(inserts).hasSize(2);
            assertInsert(inserts.get(0), oid, "1", "first");
            assertInsert(inserts.get(1), oid, "2", "second");
            int afterBlocks = all.indexOf(lastOf(lastOf(blocks))) + 1;
            List<MessageType> tail = types(all.subList(afterBlocks, all.size()));
            if (c.major() == 14) {
                // no two-phase in pgoutput 14: streamed, then committed at COMMIT PREPARED
                assertThat(tail).containsExactly(MessageType.STREAM_COMMIT);
                assertThat(all.get(all.size() - 1).as(StreamCommit.class).xid()).isEqualTo(xid);
                return;
            }
            assertThat(tail).containsExactly(MessageType.STREAM_PREPARE, MessageType.COMMIT_PREPARED);
            StreamPrepare prepare = all.get(all.size() - 2).as(StreamPrepare.class);
            assertThat(prepare.xid()).isEqualTo(xid);
            assertThat(prepare.gid()).isEqualTo("walhook-streamed");
            assertThat(prepare.flags()).isZero();
            assertThat(prepare.endLsn()).isGreaterThan(prepare.prepareLsn());
            CommitPrepared commit = all.get(all.size() - 1).as(CommitPrepared.class);
            assertThat(commit.xid()).isEqualTo(xid);
            assertThat(commit.gid()).isEqualTo("walhook-streamed");
            assertThat(commit.commitLsn()).isGreaterThanOrEqualTo(prepare.endLsn());
        });
    }

    // ------------------------------------------------------------------------------------------
    // Invariants every capture keeps
    // ------------------------------------------------------------------------------------------

    /**
     * The relations between fields that hold in every capture, whatever the scenario:
     * Begin.finalLsn == Commit.commitLsn, the same commit time in both, Commit.endLsn > commitLsn and
     * equal to the row's LSN (the peek reports a commit at its end); Begin Prepare and Prepare agree
     * on every field; the peek's xid column is the Begin's xid; changes sit inside a transaction or a
     * stream block, carry an [xid] exactly inside a block, and sit at or before the commit LSN; a
     * message's LSN is its row's; stream blocks do not nest, first_segment is set on an xid's first
     * block only and no block follows an xid's Stream Commit, Stream Abort of the top-level xid or
     * Stream Prepare; Commit Prepared and Rollback Prepared are reported at their end LSNs and point
     * past (or, for rollback, exactly at the end of) the matching Prepare; the decoder's stream state
     * follows the blocks.
     */
    static void assertProtocolInvariants(PgOutputCapture c) {
        Decoded openTx = null;
        Decoded openBlock = null;
        Map<Long, Boolean> streamedXids = new HashMap<>();   // xid -> finished
        Map<String, Prepare> prepares = new HashMap<>();     // gid/xid -> Prepare (or Stream Prepare as Prepare)
        for (Decoded d : c.decodeAll()) {
            String where = "row " + d.index() + " " + d.message();
            PgOutputMessage m = d.message();
            switch (m.messageType()) {
                case BEGIN, BEGIN_PREPARE -> {
                    assertThat(openTx).as(where + ": transaction inside a transaction").isNull();
                    assertThat(openBlock).as(where + ": transaction inside a stream block").isNull();
                    long xid = m instanceof Begin b ? b.xid() : ((BeginPrepare) m).xid();
                    assertThat(d.row().xid()).as(where + ": peek xid").isEqualTo(xid);
                    openTx = d;
                }
                case COMMIT -> {
                    assertThat(openTx).as(where + ": Commit without Begin").isNotNull();
                    Begin begin = openTx.as(Begin.class);
                    Commit commit = (Commit) m;
                    assertThat(commit.flags()).as(where).isZero();
                    assertThat(commit.commitLsn()).as(where + ": commitLsn vs Begin.finalLsn").isEqualTo(begin.finalLsn());
                    assertThat(commit.commitTime()).as(where + ": commit time").isEqualTo(begin.commitTime());
                    assertThat(commit.endLsn()).as(where + ": endLsn").isGreaterThan(commit.commitLsn());
                    assertThat(d.row().lsn()).as(where + ": peek lsn of a Commit is its end_lsn").isEqualTo(commit.endLsn());
                    assertThat(d.row().xid()).as(where + ": peek xid").isEqualTo(begin.xid());
                    assertThat(openTx.row().lsn()).as(where + ": Begin row lsn").isLessThanOrEqualTo(commit.commitLsn());
                    openTx = null;
                }
                case PREPARE -> {
                    assertThat(openTx).as(where + ": Prepare without Begin Prepare").isNotNull();
                    BeginPrepare begin = openTx.as(BeginPrepare.class);
                    Prepare prepare = (Prepare) m;
                    assertThat(prepare).as(where + ": Prepare repeats Begin Prepare").isEqualTo(new Prepare((byte) 0,
                            begin.prepareLsn(), begin.endLsn(), begin.prepareTime(), begin.xid(), begin.gid()));
                    assertThat(prepare.endLsn()).as(where).isGreaterThan(prepare.prepareLsn());
                    assertThat(d.row().lsn()).as(where + ": peek lsn of a Prepare is its end_lsn").isEqualTo(prepare.endLsn());
                    prepares.put(prepare.gid() + "/" + prepare.xid(), prepare);
                    openTx = null;
                }
                case ORIGIN -> {
                    assertThat(openTx).as(where + ": Origin outside a transaction").isNotNull();
                    assertThat(c.decodeAll().get(d.index() - 1).type()).as(where + ": Origin right after Begin")
                            .isIn(MessageType.BEGIN, MessageType.BEGIN_PREPARE);
                }
                case RELATION, TYPE, INSERT, UPDATE, DELETE, TRUNCATE -> assertChangePlace(c, d, openTx, openBlock);
                case MESSAGE -> {
                    LogicalMessage message = (LogicalMessage) m;
                    assertThat(message.lsn()).as(where + ": message LSN is its row's").isEqualTo(d.row().lsn());
                    if (message.transactional()) {
                        assertChangePlace(c, d, openTx, openBlock);
                    } else {
                        assertThat(openTx).as(where + ": non-transactional message inside a transaction").isNull();
                        assertThat(openBlock).as(where + ": non-transactional message inside a block").isNull();
                        assertThat(message.xid()).as(where).isNull();
                    }
                }
                case STREAM_START -> {
                    assertThat(openTx).as(where + ": stream block inside a transaction").isNull();
                    assertThat(openBlock).as(where + ": stream block inside a stream block").isNull();
                    StreamStart start = (StreamStart) m;
                    assertThat(streamedXids.get(start.xid())).as(where + ": block after the end of its xid")
                            .isNotEqualTo(Boolean.TRUE);
                    assertThat(start.firstSegment()).as(where + ": first_segment")
                            .isEqualTo(!streamedXids.containsKey(start.xid()));
                    assertThat(d.row().xid()).as(where + ": peek xid").isEqualTo(start.xid());
                    streamedXids.put(start.xid(), false);
                    openBlock = d;
                }
                case STREAM_STOP -> {
                    assertThat(openBlock).as(where + ": Stream Stop outside a block").isNotNull();
                    openBlock = null;
                }
                case STREAM_COMMIT -> {
                    assertOutside(where, openTx, openBlock);
                    StreamCommit commit = (StreamCommit) m;
                    assertThat(streamedXids).as(where + ": Stream Commit of an xid never streamed").containsKey(commit.xid());
                    assertThat(commit.flags()).as(where).isZero();
                    assertThat(commit.endLsn()).as(where).isGreaterThan(commit.commitLsn());
                    assertThat(d.row().lsn()).as(where + ": peek lsn is end_lsn").isEqualTo(commit.endLsn());
                    assertThat(d.row().xid()).as(where + ": peek xid").isEqualTo(commit.xid());
                    streamedXids.put(commit.xid(), true);
                }
                case STREAM_ABORT -> {
                    assertOutside(where, openTx, openBlock);
                    StreamAbort abort = (StreamAbort) m;
                    assertThat(streamedXids).as(where + ": Stream Abort of an xid never streamed").containsKey(abort.xid());
                    if (abort.abortLsn() != null) {
                        assertThat(abort.abortLsn()).as(where + ": abort_lsn is the row's").isEqualTo(d.row().lsn());
                    }
                    // the peek reports the abort under the (sub)transaction that aborted
                    assertThat(d.row().xid()).as(where + ": peek xid").isEqualTo(abort.subXid());
                    if (abort.subXid() == abort.xid()) {
                        streamedXids.put(abort.xid(), true);
                    }
                }
                case STREAM_PREPARE -> {
                    assertOutside(where, openTx, openBlock);
                    StreamPrepare prepare = (StreamPrepare) m;
                    assertThat(streamedXids).as(where + ": Stream Prepare of an xid never streamed").containsKey(prepare.xid());
                    assertThat(prepare.flags()).as(where).isZero();
                    assertThat(prepare.endLsn()).as(where).isGreaterThan(prepare.prepareLsn());
                    assertThat(d.row().lsn()).as(where + ": peek lsn is end_lsn").isEqualTo(prepare.endLsn());
                    streamedXids.put(prepare.xid(), true);
                    prepares.put(prepare.gid() + "/" + prepare.xid(), new Prepare(prepare.flags(), prepare.prepareLsn(),
                            prepare.endLsn(), prepare.prepareTime(), prepare.xid(), prepare.gid()));
                }
                case COMMIT_PREPARED -> {
                    assertOutside(where, openTx, openBlock);
                    CommitPrepared commit = (CommitPrepared) m;
                    assertThat(commit.flags()).as(where).isZero();
                    assertThat(commit.endLsn()).as(where).isGreaterThan(commit.commitLsn());
                    assertThat(d.row().lsn()).as(where + ": peek lsn is end_lsn").isEqualTo(commit.endLsn());
                    assertThat(d.row().xid()).as(where + ": peek xid").isEqualTo(commit.xid());
                    Prepare prepare = prepares.remove(commit.gid() + "/" + commit.xid());
                    assertThat(prepare).as(where + ": Commit Prepared without its Prepare").isNotNull();
                    assertThat(commit.commitLsn()).as(where + ": after the Prepare").isGreaterThanOrEqualTo(prepare.endLsn());
                }
                case ROLLBACK_PREPARED -> {
                    assertOutside(where, openTx, openBlock);
                    RollbackPrepared rollback = (RollbackPrepared) m;
                    assertThat(rollback.flags()).as(where).isZero();
                    assertThat(d.row().lsn()).as(where + ": peek lsn is rollback_end_lsn").isEqualTo(rollback.rollbackEndLsn());
                    Prepare prepare = prepares.remove(rollback.gid() + "/" + rollback.xid());
                    assertThat(prepare).as(where + ": Rollback Prepared without its Prepare").isNotNull();
                    assertThat(rollback.prepareEndLsn()).as(where + ": prepare_end_lsn").isEqualTo(prepare.endLsn());
                    assertThat(rollback.prepareTime()).as(where + ": prepare time").isEqualTo(prepare.prepareTime());
                    assertThat(rollback.rollbackEndLsn()).as(where).isGreaterThan(rollback.prepareEndLsn());
                }
            }
            assertThat(d.inStreamAfter()).as(where + ": decoder inStream()").isEqualTo(openBlock != null);
        }
        assertThat(openTx).as("transaction left open at the end").isNull();
        assertThat(openBlock).as("stream block left open at the end").isNull();
    }

    private static void assertOutside(String where, Decoded openTx, Decoded openBlock) {
        assertThat(openTx).as(where + ": inside a transaction").isNull();
        assertThat(openBlock).as(where + ": inside a stream block").isNull();
    }

    private static void assertChangePlace(PgOutputCapture c, Decoded d, Decoded openTx, Decoded openBlock) {
        String where = "row " + d.index() + " " + d.message();
        Long xid = streamXid(d.message());
        if (openBlock != null) {
            assertThat(xid).as(where + ": [xid] inside a stream block").isNotNull();
            assertThat(d.row().xid()).as(where + ": peek xid is the block's").isEqualTo(
                    openBlock.as(StreamStart.class).xid());
        } else {
            assertThat(openTx).as(where + ": change outside a transaction and a stream block").isNotNull();
            assertThat(xid).as(where + ": [xid] outside a stream block").isNull();
            assertThat(d.row().xid()).as(where + ": peek xid is the transaction's").isEqualTo(openTx.row().xid());
            Lsn finalLsn = openTx.message() instanceof Begin b ? b.finalLsn() : openTx.as(BeginPrepare.class).prepareLsn();
            assertThat(d.row().lsn()).as(where + ": change before its commit").isLessThanOrEqualTo(finalLsn);
        }
    }

    // ------------------------------------------------------------------------------------------
    // Helpers
    // ------------------------------------------------------------------------------------------

    /** Whether the capture was peeked with streaming. */
    static boolean streams(PgOutputCapture c) {
        return c.options().containsKey("streaming");
    }

    /** The [xid] of a message that can carry one, {@code null} when absent or not applicable. */
    static Long streamXid(PgOutputMessage m) {
        return switch (m.messageType()) {
            case RELATION -> ((Relation) m).xid();
            case TYPE -> ((Type) m).xid();
            case INSERT -> ((Insert) m).xid();
            case UPDATE -> ((Update) m).xid();
            case DELETE -> ((Delete) m).xid();
            case TRUNCATE -> ((Truncate) m).xid();
            case MESSAGE -> ((LogicalMessage) m).xid();
            case BEGIN, COMMIT, ORIGIN, STREAM_START, STREAM_STOP, STREAM_COMMIT, STREAM_ABORT, BEGIN_PREPARE, PREPARE,
                    COMMIT_PREPARED, ROLLBACK_PREPARED, STREAM_PREPARE -> null;
        };
    }

    /** The gid of a two-phase message, "" for the others. */
    static String gid(PgOutputMessage m) {
        return switch (m.messageType()) {
            case BEGIN_PREPARE -> ((BeginPrepare) m).gid();
            case PREPARE -> ((Prepare) m).gid();
            case COMMIT_PREPARED -> ((CommitPrepared) m).gid();
            case ROLLBACK_PREPARED -> ((RollbackPrepared) m).gid();
            case STREAM_PREPARE -> ((StreamPrepare) m).gid();
            case BEGIN, COMMIT, ORIGIN, RELATION, TYPE, INSERT, UPDATE, DELETE, TRUNCATE, MESSAGE, STREAM_START,
                    STREAM_STOP, STREAM_COMMIT, STREAM_ABORT -> "";
        };
    }

    static List<MessageType> types(List<Decoded> messages) {
        return messages.stream().map(Decoded::type).toList();
    }

    /**
     * The messages of the transaction recorded as {@code xid.<name>}: from its Begin (or Begin
     * Prepare) through its Commit (or Prepare). Fails unless there is exactly one.
     */
    static List<Decoded> transaction(PgOutputCapture c, String name) {
        long xid = c.fact("xid." + name);
        List<Decoded> all = c.messages();
        List<Integer> starts = new ArrayList<>();
        for (int i = 0; i < all.size(); i++) {
            PgOutputMessage m = all.get(i).message();
            if (m instanceof Begin b && b.xid() == xid || m instanceof BeginPrepare b2 && b2.xid() == xid) {
                starts.add(i);
            }
        }
        assertThat(starts).as("transactions with xid.%s = %d in %s", name, xid, types(all)).hasSize(1);
        int start = starts.get(0);
        for (int i = start + 1; i < all.size(); i++) {
            MessageType type = all.get(i).type();
            if (type == MessageType.COMMIT || type == MessageType.PREPARE) {
                return all.subList(start, i + 1);
            }
        }
        throw new AssertionError("transaction xid." + name + " has no end in " + types(all));
    }

    /** The stream blocks of {@code xid}, each from its Stream Start through its Stream Stop. */
    static List<List<Decoded>> blocks(PgOutputCapture c, long xid) {
        List<Decoded> all = c.messages();
        List<List<Decoded>> blocks = new ArrayList<>();
        for (int i = 0; i < all.size(); i++) {
            if (all.get(i).message() instanceof StreamStart s && s.xid() == xid) {
                int end = i;
                while (all.get(end).type() != MessageType.STREAM_STOP) {
                    end++;
                }
                blocks.add(all.subList(i, end + 1));
                i = end;
            }
        }
        assertThat(blocks).as("stream blocks of xid %d in %s", xid, types(all)).isNotEmpty();
        return blocks;
    }

    /** The messages inside the blocks, without their Stream Start and Stream Stop. */
    static List<Decoded> inside(List<List<Decoded>> blocks) {
        List<Decoded> inside = new ArrayList<>();
        for (List<Decoded> block : blocks) {
            inside.addAll(block.subList(1, block.size() - 1));
        }
        return inside;
    }

    static <T> T lastOf(List<T> list) {
        return list.get(list.size() - 1);
    }

    /** The last message of a type; fails when there is none. */
    static Decoded last(PgOutputCapture c, MessageType type) {
        List<Decoded> matching = c.messages().stream().filter(d -> d.type() == type).toList();
        assertThat(matching).as("%s messages", type).isNotEmpty();
        return lastOf(matching);
    }

    /** The changes of the stream-commit scenario, in or out of stream blocks, with their Type and Relations. */
    private static void assertStreamCommitChanges(PgOutputCapture c, List<Decoded> changes) {
        List<Decoded> data = changes.stream()
                .filter(d -> d.type() != MessageType.RELATION && d.type() != MessageType.TYPE).toList();
        assertThat(types(data)).containsExactly(MessageType.INSERT, MessageType.INSERT, MessageType.UPDATE,
                MessageType.DELETE, MessageType.TRUNCATE, MessageType.MESSAGE);
        long rows = c.fact("oid.rows");
        assertInsert(data.get(0), rows, "1", "happy", "one");
        assertInsert(data.get(1), rows, "2", "sad", "two");
        Update update = data.get(2).as(Update.class);
        assertThat(update.relationId()).isEqualTo(rows);
        assertThat(update.keyTuple()).isNull();
        assertTuple(update.newTuple(), "1", "happy", "uno");
        assertTuple(data.get(3).as(Delete.class).keyTuple(), "2", null, null);
        Truncate truncate = data.get(4).as(Truncate.class);
        assertThat(truncate.relationIds()).containsExactly(c.fact("oid.truncated"));
        assertThat(truncate.cascade()).isFalse();
        assertThat(truncate.restartIdentity()).isFalse();
        assertMessage(data.get(5), true, "walhook.streamed", "in the stream".getBytes(StandardCharsets.UTF_8));

        // The enum's Type, then the table's Relation, before the first insert; the truncated table's before the Truncate.
        int firstInsert = changes.indexOf(data.get(0));
        assertThat(types(changes.subList(0, firstInsert))).containsExactly(MessageType.TYPE, MessageType.RELATION);
        Type type = changes.get(0).as(Type.class);
        assertThat(type.typeOid()).isEqualTo(c.fact("type.mood"));
        assertThat(type.typeName()).isEqualTo("mood");
        assertThat(type.namespace()).isEqualTo("public");
        assertRelation(changes.get(1).as(Relation.class), rows, "public", "stream_rows", ReplicaIdentity.DEFAULT,
                new Column(true, "id", INT4, -1), new Column(false, "m", c.fact("type.mood"), -1),
                new Column(false, "v", TEXT, -1));
        Decoded truncateRow = data.get(4);
        Decoded beforeTruncate = changes.get(changes.indexOf(truncateRow) - 1);
        assertThat(beforeTruncate.as(Relation.class).relationId()).isEqualTo(c.fact("oid.truncated"));
        assertThat(beforeTruncate.as(Relation.class).relationName()).isEqualTo("stream_truncated");
    }

    private static void assertTruncate(PgOutputCapture c, String name, boolean cascade, boolean restartIdentity,
            String... tables) {
        List<Decoded> tx = transaction(c, name);
        List<MessageType> expectedTypes = new ArrayList<>();
        expectedTypes.add(MessageType.BEGIN);
        for (int i = 0; i < tables.length; i++) {
            expectedTypes.add(MessageType.RELATION);
        }
        expectedTypes.add(MessageType.TRUNCATE);
        expectedTypes.add(MessageType.COMMIT);
        assertThat(types(tx)).as("truncate %s", name).isEqualTo(expectedTypes);
        List<Long> oids = new ArrayList<>();
        for (int i = 0; i < tables.length; i++) {
            long oid = c.fact("oid." + tables[i]);
            oids.add(oid);
            Relation relation = tx.get(1 + i).as(Relation.class);
            assertThat(relation.relationId()).isEqualTo(oid);
            assertThat(relation.relationName()).isEqualTo("trunc_" + tables[i]);
        }
        Truncate truncate = tx.get(1 + tables.length).as(Truncate.class);
        assertThat(truncate).isEqualTo(new Truncate(null, oids, cascade, restartIdentity));
    }

    static void assertRelation(Relation relation, long oid, String namespace, String name, ReplicaIdentity identity,
            Column... columns) {
        assertThat(relation.relationId()).as("relation OID").isEqualTo(oid);
        assertThat(relation.namespace()).isEqualTo(namespace);
        assertThat(relation.relationName()).isEqualTo(name);
        assertThat(relation.replicaIdentity()).isEqualTo(identity);
        assertThat(relation.columns()).containsExactly(columns);
    }

    static void assertInsert(Decoded d, long relationId, Object... values) {
        Insert insert = d.as(Insert.class);
        assertThat(insert.relationId()).as("Insert relation OID").isEqualTo(relationId);
        assertTuple(insert.newTuple(), values);
    }

    static void assertMessage(Decoded d, boolean transactional, String prefix, byte[] content) {
        LogicalMessage message = d.as(LogicalMessage.class);
        assertThat(message.transactional()).as("transactional").isEqualTo(transactional);
        assertThat(message.prefix()).isEqualTo(prefix);
        assertThat(message.contentLength()).isEqualTo(content.length);
        assertThat(message.contentBytes()).isEqualTo(content);
    }

    /**
     * Compares a tuple column by column: a String is a {@code 't'} value with that text, {@code null}
     * is {@code 'n'}, {@link #UNCHANGED} is {@code 'u'}, a {@link Bin} is a {@code 'b'} value.
     */
    static void assertTuple(TupleData tuple, Object... expected) {
        assertThat(tuple).as("tuple").isNotNull();
        List<String> actualColumns = new ArrayList<>();
        for (int i = 0; i < tuple.size(); i++) {
            actualColumns.add(switch (tuple.kind(i)) {
                case NULL -> "n";
                case UNCHANGED_TOAST -> "u";
                case TEXT -> "t:" + tuple.text(i);
                case BINARY -> "b:" + HexFormat.of().formatHex(tuple.bytes(i));
            });
        }
        List<String> expectedColumns = new ArrayList<>();
        for (Object e : expected) {
            if (e == null) {
                expectedColumns.add("n");
            } else if (e == UNCHANGED) {
                expectedColumns.add("u");
            } else if (e instanceof Bin bin) {
                expectedColumns.add("b:" + bin.hex().toLowerCase(Locale.ROOT));
            } else {
                expectedColumns.add("t:" + e);
            }
        }
        assertThat(actualColumns).isEqualTo(expectedColumns);
    }

    /** The TOASTed value the toast scenario writes: md5 of 1, 2, ... concatenated. */
    static String toastedValue() {
        try {
            MessageDigest md5 = MessageDigest.getInstance("MD5");
            StringBuilder value = new StringBuilder();
            for (int i = 1; i <= PgOutputScenario.TOAST_MD5S; i++) {
                value.append(HexFormat.of().formatHex(md5.digest(Integer.toString(i).getBytes(StandardCharsets.UTF_8))));
            }
            return value.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
