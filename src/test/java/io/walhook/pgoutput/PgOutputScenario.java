package io.walhook.pgoutput;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * The SQL of the conformance scenarios (docs/protocol.md section 7, as far as the SQL interface reaches):
 * what each does on a live server, the tables and publication it needs, and the options it peeks
 * with. What the bytes must then say is in {@link PgOutputScenarioChecks}.
 *
 * <p>Each scenario gets its own publication ({@code <id>_pub}) and slot, created after its tables
 * and dropped after the peeks, so the peeks decode only its own WAL. Transactions are recorded as
 * facts ({@code xid.<name>}) with {@code pg_current_xact_id()} inside them.
 *
 * <p>Streaming needs a transaction larger than {@code logical_decoding_work_mem} (64kB in the
 * peeking session, the minimum): the streamed scenarios write {@link #BALLAST} into an unpublished
 * table, which counts toward the limit but sends nothing, so the fixtures stay small.
 */
enum PgOutputScenario {

    /** Type and Relation messages: domain, enum, composite, array of a user type, extension type; non-ASCII names; '' and NULL. */
    TYPES("types", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("""
                    CREATE TABLE "ünïcødé_表" (id int PRIMARY KEY, "naïve_列" text, d posint, m mood, p pair,
                        ms mood[], h hstore, vc varchar(10), nm numeric(10,2), e text, z text)""",
                    "CREATE PUBLICATION types_pub FOR TABLE \"ünïcødé_表\"");
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("table", "\"ünïcødé_表\"");
            sql.recordType("posint", "posint");
            sql.recordType("mood", "mood");
            sql.recordType("moodArray", "mood[]");
            sql.recordType("pair", "pair");
            sql.recordType("hstore", "hstore");
            sql.exec("BEGIN", """
                    INSERT INTO "ünïcødé_表" VALUES (1, 'é', 5, 'happy', '(1,x)', '{happy,sad}', 'a=>1', 'abc',
                        12.5, '', NULL)""");
            sql.recordXid("insert");
            sql.exec("COMMIT");
        }
    },

    /** A table of 1600 columns, the most PostgreSQL allows. */
    WIDE("wide", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE wide (" + IntStream.rangeClosed(1, WIDE_COLUMNS).mapToObj(i -> "c" + i + " int")
                    .collect(Collectors.joining(", ")) + ")", "CREATE PUBLICATION wide_pub FOR TABLE wide");
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("wide", "wide");
            String columns = IntStream.rangeClosed(1, WIDE_COLUMNS).filter(PgOutputScenario::wideColumnHasValue)
                    .mapToObj(i -> "c" + i).collect(Collectors.joining(", "));
            String values = IntStream.rangeClosed(1, WIDE_COLUMNS).filter(PgOutputScenario::wideColumnHasValue)
                    .mapToObj(Integer::toString).collect(Collectors.joining(", "));
            sql.exec("BEGIN", "INSERT INTO wide (" + columns + ") VALUES (" + values + ")");
            sql.recordXid("insert");
            sql.exec("COMMIT");
        }
    },

    /** Insert, COPY, update with and without key change, delete, upsert, savepoint rollback; REPLICA IDENTITY DEFAULT. */
    DML("dml", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric(12,2))",
                    "CREATE PUBLICATION dml_pub FOR TABLE accounts");
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("accounts", "accounts");
            sql.exec("BEGIN", "INSERT INTO accounts VALUES (1, 'ann', 10.5), (2, 'bob', NULL), (3, '', 0)");
            sql.recordXid("insert");
            sql.exec("COMMIT", "BEGIN");
            sql.copyIn("COPY accounts FROM STDIN", "4\tcy\t1\n5\tdee\t2\n6\t\\N\t3\n");
            sql.recordXid("copy");
            sql.exec("COMMIT", "BEGIN", "UPDATE accounts SET balance = 11 WHERE id = 1");
            sql.recordXid("update");
            sql.exec("COMMIT", "BEGIN", "UPDATE accounts SET id = 20 WHERE id = 2");
            sql.recordXid("updateKey");
            sql.exec("COMMIT", "BEGIN", "DELETE FROM accounts WHERE id = 3");
            sql.recordXid("delete");
            sql.exec("COMMIT", "BEGIN",
                    "INSERT INTO accounts VALUES (1, 'ann', 0) ON CONFLICT (id) DO UPDATE SET balance = 99",
                    "INSERT INTO accounts VALUES (7, 'eve', 7) ON CONFLICT DO NOTHING");
            sql.recordXid("upsert");
            sql.exec("COMMIT", "BEGIN", "INSERT INTO accounts VALUES (30, 'kept', 1)", "SAVEPOINT doomed",
                    "INSERT INTO accounts VALUES (31, 'rolled back', 2)", "ROLLBACK TO SAVEPOINT doomed",
                    "INSERT INTO accounts VALUES (32, 'kept too', 3)");
            sql.recordXid("savepoint");
            sql.exec("COMMIT");
        }
    },

    /** REPLICA IDENTITY FULL, USING INDEX and NOTHING. */
    IDENTITY("identity", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE ident_full (id int, v text)",
                    "ALTER TABLE ident_full REPLICA IDENTITY FULL",
                    "CREATE TABLE ident_index (id int PRIMARY KEY, code text NOT NULL UNIQUE, v text)",
                    "ALTER TABLE ident_index REPLICA IDENTITY USING INDEX ident_index_code_key",
                    "CREATE TABLE ident_nothing (id int PRIMARY KEY, v text)",
                    "ALTER TABLE ident_nothing REPLICA IDENTITY NOTHING",
                    "CREATE PUBLICATION identity_pub FOR TABLE ident_full, ident_index",
                    // NOTHING with a publication of updates refuses UPDATE: this one publishes inserts only.
                    "CREATE PUBLICATION identity_insert_pub FOR TABLE ident_nothing WITH (publish = 'insert')");
        }

        @Override
        String publications() {
            return "identity_pub,identity_insert_pub";
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("full", "ident_full");
            sql.recordTable("index", "ident_index");
            sql.recordTable("nothing", "ident_nothing");
            sql.exec("BEGIN", "INSERT INTO ident_full VALUES (1, 'a')", "UPDATE ident_full SET v = 'b'",
                    "DELETE FROM ident_full");
            sql.recordXid("full");
            sql.exec("COMMIT", "BEGIN", "INSERT INTO ident_index VALUES (1, 'c1', 'x')",
                    "UPDATE ident_index SET v = 'y'", "UPDATE ident_index SET code = 'c2'", "DELETE FROM ident_index");
            sql.recordXid("index");
            sql.exec("COMMIT", "BEGIN", "INSERT INTO ident_nothing VALUES (1, 'x')",
                    "UPDATE ident_nothing SET v = 'y'", "DELETE FROM ident_nothing");
            sql.recordXid("nothing");
            sql.exec("COMMIT");
        }
    },

    /** Values stored out of line: 'u' in new tuples, detoasted old rows under FULL, a TOASTed key. */
    TOAST("toast", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE toast_default (id int PRIMARY KEY, big text, small text)",
                    "CREATE TABLE toast_full (id int PRIMARY KEY, big text, small text)",
                    "ALTER TABLE toast_full REPLICA IDENTITY FULL",
                    "CREATE TABLE toast_key (k text PRIMARY KEY, v int)",
                    // no compression: the key goes out of line and still fits a btree entry
                    "ALTER TABLE toast_key ALTER COLUMN k SET STORAGE EXTERNAL",
                    "CREATE PUBLICATION toast_pub FOR TABLE toast_default, toast_full, toast_key");
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("default", "toast_default");
            sql.recordTable("full", "toast_full");
            sql.recordTable("key", "toast_key");
            String big = "(SELECT string_agg(md5(i::text), '' ORDER BY i) FROM generate_series(1, " + TOAST_MD5S + ") i)";
            sql.exec("BEGIN", "INSERT INTO toast_default VALUES (1, " + big + ", 'a')");
            sql.recordXid("insertDefault");
            sql.exec("COMMIT", "BEGIN", "UPDATE toast_default SET small = 'b'");
            sql.recordXid("updateDefault");
            sql.exec("COMMIT", "BEGIN", "DELETE FROM toast_default");
            sql.recordXid("deleteDefault");
            sql.exec("COMMIT", "BEGIN", "INSERT INTO toast_full VALUES (1, " + big + ", 'a')");
            sql.recordXid("insertFull");
            sql.exec("COMMIT", "BEGIN", "UPDATE toast_full SET small = 'b'");
            sql.recordXid("updateFull");
            sql.exec("COMMIT", "BEGIN", "DELETE FROM toast_full");
            sql.recordXid("deleteFull");
            sql.exec("COMMIT", "BEGIN", "INSERT INTO toast_key VALUES (" + big + ", 1)");
            sql.recordXid("insertKey");
            sql.exec("COMMIT", "BEGIN", "UPDATE toast_key SET v = 2");
            sql.recordXid("updateKey");
            sql.exec("COMMIT");
        }
    },

    /** TRUNCATE of one table, several, CASCADE, RESTART IDENTITY, and with an unpublished table. */
    TRUNCATE("truncate", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE trunc_a (id int PRIMARY KEY)", "CREATE TABLE trunc_b (id int PRIMARY KEY)",
                    "CREATE TABLE trunc_parent (id int PRIMARY KEY)",
                    "CREATE TABLE trunc_child (id int PRIMARY KEY, parent int REFERENCES trunc_parent)",
                    "CREATE TABLE trunc_seq (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text)",
                    "CREATE TABLE trunc_unpublished (id int)",
                    "CREATE PUBLICATION truncate_pub FOR TABLE trunc_a, trunc_b, trunc_parent, trunc_child, trunc_seq");
        }

        @Override
        void run(ScenarioSession sql) {
            for (String t : new String[] {"a", "b", "parent", "child", "seq", "unpublished"}) {
                sql.recordTable(t, "trunc_" + t);
            }
            sql.exec("BEGIN", "TRUNCATE trunc_a");
            sql.recordXid("one");
            sql.exec("COMMIT", "BEGIN", "TRUNCATE trunc_a, trunc_b");
            sql.recordXid("several");
            sql.exec("COMMIT", "BEGIN", "TRUNCATE trunc_parent CASCADE");
            sql.recordXid("cascade");
            sql.exec("COMMIT", "BEGIN", "TRUNCATE trunc_seq RESTART IDENTITY");
            sql.recordXid("restartIdentity");
            sql.exec("COMMIT", "BEGIN", "TRUNCATE trunc_b, trunc_unpublished");
            sql.recordXid("withUnpublished");
            sql.exec("COMMIT");
        }
    },

    /** ADD COLUMN and DROP COLUMN between inserts of one transaction. */
    SCHEMA("schema", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE evolving (id int PRIMARY KEY, v text)",
                    "CREATE PUBLICATION schema_pub FOR TABLE evolving");
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("evolving", "evolving");
            sql.exec("BEGIN", "INSERT INTO evolving VALUES (1, 'a')",
                    "ALTER TABLE evolving ADD COLUMN w int DEFAULT 7", "INSERT INTO evolving VALUES (2, 'b', 8)",
                    "ALTER TABLE evolving DROP COLUMN v", "INSERT INTO evolving VALUES (3, 9)");
            sql.recordXid("evolve");
            sql.exec("COMMIT");
        }
    },

    /** pg_logical_emit_message, transactional and not, text, bytes and empty, committed and rolled back. */
    MESSAGES("messages", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE notes (id int PRIMARY KEY)", "CREATE PUBLICATION messages_pub FOR TABLE notes");
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("notes", "notes");
            sql.exec("SELECT pg_logical_emit_message(false, 'walhook.outside', 'outside')");
            sql.exec("BEGIN", "INSERT INTO notes VALUES (1)",
                    "SELECT pg_logical_emit_message(false, 'walhook.early', 'before commit')",
                    "SELECT pg_logical_emit_message(true, 'walhook.text', 'inside ✓')",
                    "SELECT pg_logical_emit_message(true, 'walhook.bytes', '\\x00ff80fe'::bytea)",
                    "SELECT pg_logical_emit_message(true, 'walhook.empty', '')");
            sql.recordXid("committed");
            sql.exec("COMMIT", "BEGIN", "INSERT INTO notes VALUES (2)",
                    "SELECT pg_logical_emit_message(false, 'walhook.rolledback', 'still sent')",
                    "SELECT pg_logical_emit_message(true, 'walhook.rolledback.tx', 'never sent')");
            sql.recordXid("rolledBack");
            sql.exec("ROLLBACK");
        }
    },

    /** A transaction replayed from a replication origin, and a local one; protocol 4 filters with origin = none. */
    ORIGIN("origin", false, true) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE replicated (id int PRIMARY KEY, v text)",
                    "CREATE PUBLICATION origin_pub FOR TABLE replicated",
                    "SELECT pg_replication_origin_create('" + ORIGIN_NAME + "')");
        }

        @Override
        Map<String, String> options(int major, int protocol) {
            Map<String, String> options = super.options(major, protocol);
            if (protocol >= 4) {
                options.put("origin", "none");
            }
            return options;
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("replicated", "replicated");
            sql.exec("SELECT pg_replication_origin_session_setup('" + ORIGIN_NAME + "')", "BEGIN",
                    "SELECT pg_replication_origin_xact_setup('" + ORIGIN_LSN + "', '" + ORIGIN_TIME_SQL + "')",
                    "INSERT INTO replicated VALUES (1, 'from upstream')");
            sql.recordXid("replicated");
            sql.exec("COMMIT", "SELECT pg_replication_origin_session_reset()", "BEGIN",
                    "INSERT INTO replicated VALUES (2, 'local')");
            sql.recordXid("local");
            sql.exec("COMMIT");
        }
    },

    /** Transactions with nothing published: an unpublished table, DDL alone. */
    EMPTY("empty", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE quiet_published (id int PRIMARY KEY)", "CREATE TABLE quiet_unpublished (id int)",
                    "CREATE PUBLICATION empty_pub FOR TABLE quiet_published");
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("published", "quiet_published");
            sql.exec("BEGIN", "INSERT INTO quiet_unpublished VALUES (1)");
            sql.recordXid("unpublished");
            sql.exec("COMMIT", "BEGIN", "ALTER TABLE quiet_unpublished ADD COLUMN note text");
            sql.recordXid("ddl");
            sql.exec("COMMIT", "BEGIN", "ALTER TABLE quiet_published ADD COLUMN note text");
            sql.recordXid("ddlOnPublished");
            sql.exec("COMMIT", "BEGIN", "INSERT INTO quiet_published VALUES (1, 'x')");
            sql.recordXid("published");
            sql.exec("COMMIT");
        }
    },

    /** Option binary: values in the types' send formats. */
    BINARY("binary", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("""
                    CREATE TABLE binary_values (id int PRIMARY KEY, big bigint, flag bool, label text, empty text,
                        missing int, raw bytea, ints int[], m mood, p pair, d posint, f float8, day date)""",
                    "CREATE PUBLICATION binary_pub FOR TABLE binary_values");
        }

        @Override
        Map<String, String> options(int major, int protocol) {
            Map<String, String> options = super.options(major, protocol);
            options.put("binary", "true");
            return options;
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("values", "binary_values");
            sql.recordType("mood", "mood");
            sql.recordType("pair", "pair");
            sql.recordType("posint", "posint");
            sql.exec("BEGIN", """
                    INSERT INTO binary_values VALUES (42, 9000000000, true, 'héllo', '', NULL, '\\x00ff', '{1,2}',
                        'happy', '(7,x)', 5, 1.5, '2000-01-02')""");
            sql.recordXid("insert");
            sql.exec("COMMIT");
        }
    },

    /** Text values of the awkward kinds: NaN, infinities, -0, BC dates, time zones, intervals, arrays, ranges, jsonb, xml, money. */
    TEXT_VALUES("text-values", false, false) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("""
                    CREATE TABLE text_values (id int PRIMARY KEY, n_nan numeric, n_pinf numeric, n_ninf numeric,
                        n_big numeric(30,10), f_nan float8, f_inf float8, f_ninf float8, f_negz float8, f_tenth float4,
                        ts_pinf timestamp, ts_ninf timestamp, d_bc date, tstz timestamptz, iv interval,
                        a_null int[], a_strnull text[], a_empty int[], a_2d int[], a_bounds int[], r int4range,
                        mr int4multirange, j jsonb, x xml, mo money, by bytea, b bool, u uuid, t time,
                        c char(3), bits varbit, ip inet)""",
                    "CREATE PUBLICATION text_values_pub FOR TABLE text_values");
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("values", "text_values");
            // The writer's time zone differs from the reader's (UTC): timestamptz is converted on output.
            sql.exec("SET TimeZone = 'America/New_York'", "SET lc_monetary = 'C'", "BEGIN", """
                    INSERT INTO text_values VALUES (1, 'NaN', 'Infinity', '-Infinity',
                        12345678901234567890.0123456789, 'NaN', 'Infinity', '-Infinity', '-0', 0.1, 'infinity',
                        '-infinity', '0044-03-15 BC', '2024-06-01 12:00:00', '1 year 2 mons 3 days 04:05:06.789',
                        '{1,NULL,3}', '{"NULL",NULL,"a b"}', '{}', '{{1,2},{3,4}}', '[0:1]={5,6}', '[1,5)',
                        '{[1,3),[5,7)}', '{"b":1,"a":[true,null,"é"]}', '<a x="1">t</a>', 12.34, '\\x00ff', true,
                        'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '04:05:06.5', 'ab', B'101', '192.168.0.1/24')""");
            sql.recordXid("insert");
            sql.exec("COMMIT", "RESET TimeZone");
        }
    },

    /** A streamed transaction with every change message, a Type, and a non-transactional message between blocks. */
    STREAM_COMMIT("stream-commit", false, true) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE stream_rows (id int PRIMARY KEY, m mood, v text)",
                    "CREATE TABLE stream_truncated (id int PRIMARY KEY)",
                    "CREATE PUBLICATION stream_commit_pub FOR TABLE stream_rows, stream_truncated");
        }

        @Override
        Map<String, String> options(int major, int protocol) {
            return streaming(super.options(major, protocol), protocol);
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("rows", "stream_rows");
            sql.recordTable("truncated", "stream_truncated");
            sql.recordType("mood", "mood");
            sql.exec("BEGIN", "INSERT INTO stream_rows VALUES (1, 'happy', 'one')", BALLAST,
                    "INSERT INTO stream_rows VALUES (2, 'sad', 'two')", BALLAST,
                    "UPDATE stream_rows SET v = 'uno' WHERE id = 1", "DELETE FROM stream_rows WHERE id = 2",
                    "TRUNCATE stream_truncated",
                    "SELECT pg_logical_emit_message(true, 'walhook.streamed', 'in the stream')",
                    "SELECT pg_logical_emit_message(false, 'walhook.between', 'between blocks')");
            sql.recordXid("streamed");
            sql.exec("COMMIT");
        }
    },

    /** A streamed transaction that rolls back. */
    STREAM_ABORT("stream-abort", false, true) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE stream_aborted (id int PRIMARY KEY, v text)",
                    "CREATE PUBLICATION stream_abort_pub FOR TABLE stream_aborted");
        }

        @Override
        Map<String, String> options(int major, int protocol) {
            return streaming(super.options(major, protocol), protocol);
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("aborted", "stream_aborted");
            sql.exec("BEGIN", "INSERT INTO stream_aborted VALUES (1, 'gone')", BALLAST,
                    "INSERT INTO stream_aborted VALUES (2, 'gone too')", BALLAST);
            sql.recordXid("aborted");
            sql.exec("ROLLBACK");
        }
    },

    /** A subtransaction of a streamed transaction rolls back after it was streamed. */
    STREAM_SUBABORT("stream-subabort", false, true) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE stream_sub (id int PRIMARY KEY, v text)",
                    "CREATE PUBLICATION stream_subabort_pub FOR TABLE stream_sub");
        }

        @Override
        Map<String, String> options(int major, int protocol) {
            return streaming(super.options(major, protocol), protocol);
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("sub", "stream_sub");
            sql.exec("BEGIN", "INSERT INTO stream_sub VALUES (1, 'kept')");
            sql.recordXid("top");
            sql.exec("SAVEPOINT doomed", "INSERT INTO stream_sub VALUES (2, 'rolled back')");
            sql.recordRowXid("sub", "stream_sub", "id = 2");
            sql.exec(BALLAST, "ROLLBACK TO SAVEPOINT doomed", "RELEASE SAVEPOINT doomed",
                    "INSERT INTO stream_sub VALUES (3, 'kept too')", "COMMIT");
        }
    },

    /** Two streamed transactions interleaved, and an ordinary one committing between their blocks. */
    STREAM_INTERLEAVED("stream-interleaved", false, true) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE stream_pair (id int PRIMARY KEY, who text)",
                    "CREATE PUBLICATION stream_interleaved_pub FOR TABLE stream_pair");
        }

        @Override
        Map<String, String> options(int major, int protocol) {
            return streaming(super.options(major, protocol), protocol);
        }

        @Override
        void run(ScenarioSession a) {
            a.recordTable("pair", "stream_pair");
            try (ScenarioSession b = a.another(); ScenarioSession c = a.another()) {
                a.exec("BEGIN", "INSERT INTO stream_pair VALUES (1, 'a')");
                a.recordXid("a");
                a.exec(BALLAST);
                b.exec("BEGIN", "INSERT INTO stream_pair VALUES (2, 'b')");
                b.recordXid("b");
                b.exec(BALLAST);
                c.exec("BEGIN", "INSERT INTO stream_pair VALUES (3, 'between')");
                c.recordXid("between");
                c.exec("COMMIT");
                a.exec("INSERT INTO stream_pair VALUES (4, 'a')", "COMMIT");
                b.exec("INSERT INTO stream_pair VALUES (5, 'b')", "COMMIT");
            }
        }
    },

    /** Two-phase commit: COMMIT PREPARED, ROLLBACK PREPARED, nothing published, nothing at all, a reused gid. */
    TWO_PHASE("two-phase", true, true) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE orders (id int PRIMARY KEY, item text)", "CREATE TABLE orders_audit (id int)",
                    "CREATE PUBLICATION two_phase_pub FOR TABLE orders");
        }

        @Override
        Map<String, String> options(int major, int protocol) {
            return twoPhase(super.options(major, protocol), protocol);
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("orders", "orders");
            sql.exec("BEGIN", "INSERT INTO orders VALUES (1, 'committed')");
            sql.recordXid("committed");
            sql.exec("PREPARE TRANSACTION 'walhook-commit'", "COMMIT PREPARED 'walhook-commit'");
            sql.exec("BEGIN", "INSERT INTO orders VALUES (2, 'rolled back')");
            sql.recordXid("rolledBack");
            sql.exec("PREPARE TRANSACTION 'walhook-rollback'", "ROLLBACK PREPARED 'walhook-rollback'");
            sql.exec("BEGIN", "INSERT INTO orders_audit VALUES (3)");
            sql.recordXid("unpublished");
            sql.exec("PREPARE TRANSACTION 'walhook-unpublished'", "COMMIT PREPARED 'walhook-unpublished'");
            sql.exec("BEGIN");
            sql.recordXid("nothing");
            sql.exec("PREPARE TRANSACTION 'walhook-nothing'", "COMMIT PREPARED 'walhook-nothing'");
            sql.exec("BEGIN", "INSERT INTO orders VALUES (4, 'gid reused')");
            sql.recordXid("reused");
            sql.exec("PREPARE TRANSACTION 'walhook-commit'", "COMMIT PREPARED 'walhook-commit'");
        }
    },

    /** A streamed transaction that is then prepared, and committed. */
    STREAM_PREPARE("stream-prepare", true, true) {
        @Override
        void setUp(ScenarioSession sql) {
            sql.exec("CREATE TABLE big_orders (id int PRIMARY KEY, item text)",
                    "CREATE PUBLICATION stream_prepare_pub FOR TABLE big_orders");
        }

        @Override
        Map<String, String> options(int major, int protocol) {
            return twoPhase(streaming(super.options(major, protocol), protocol), protocol);
        }

        @Override
        void run(ScenarioSession sql) {
            sql.recordTable("orders", "big_orders");
            sql.exec("BEGIN", "INSERT INTO big_orders VALUES (1, 'first')", BALLAST,
                    "INSERT INTO big_orders VALUES (2, 'second')");
            sql.recordXid("prepared");
            sql.exec("PREPARE TRANSACTION 'walhook-streamed'", "COMMIT PREPARED 'walhook-streamed'");
        }
    };

    /** Columns of {@link #WIDE}: MaxHeapAttributeNumber. */
    static final int WIDE_COLUMNS = 1600;
    /** md5 strings in the TOASTed values: 2560 characters that pglz cannot shrink, so they go out of line. */
    static final int TOAST_MD5S = 80;
    static final String ORIGIN_NAME = "walhook_upstream";
    static final String ORIGIN_LSN = "0/ABCDEF";
    static final String ORIGIN_TIME_SQL = "2024-01-02 03:04:05.123456+00";
    /** 40 rows of about 2 kB into an unpublished table: over 64kB of reorder buffer, nothing published. */
    static final String BALLAST = "INSERT INTO ballast (pad) SELECT repeat('x', 1900) FROM generate_series(1, 40)";

    /** Objects several scenarios share, made once per database before any slot. */
    static final String[] SHARED_OBJECTS = {
        "CREATE EXTENSION hstore",
        "CREATE DOMAIN posint AS int CHECK (VALUE > 0)",
        "CREATE TYPE mood AS ENUM ('sad', 'happy')",
        "CREATE TYPE pair AS (a int, b text)",
        "CREATE TABLE ballast (id bigserial, pad text)",
    };

    private final String id;
    private final boolean twoPhaseSlot;
    private final boolean protocolSensitive;

    PgOutputScenario(String id, boolean twoPhaseSlot, boolean protocolSensitive) {
        this.id = id;
        this.twoPhaseSlot = twoPhaseSlot;
        this.protocolSensitive = protocolSensitive;
    }

    /** The name in fixture files. */
    String id() {
        return id;
    }

    /** Whether the slot is created with two_phase (a permanent property of a slot). */
    boolean twoPhaseSlot() {
        return twoPhaseSlot;
    }

    /**
     * Whether the scenario peeks with options that depend on the protocol version (streaming,
     * two_phase, origin), so its bytes do too. The others must give the same bytes at every version;
     * their golden fixtures are kept at the highest version only.
     */
    boolean protocolSensitive() {
        return protocolSensitive;
    }

    /** The publication_names option. */
    String publications() {
        return id.replace('-', '_') + "_pub";
    }

    /** The peek options at this protocol version, gated by what the server and the version support. */
    Map<String, String> options(int major, int protocol) {
        Map<String, String> options = new LinkedHashMap<>();
        options.put("proto_version", Integer.toString(protocol));
        options.put("publication_names", publications());
        options.put("messages", "true");
        return options;
    }

    /** Tables and publication, made before the slot so that their DDL is not decoded. */
    abstract void setUp(ScenarioSession sql);

    /** The changes the slot decodes, recording their transaction ids and the OIDs involved. */
    abstract void run(ScenarioSession sql);

    static int maxProtocol(int major) {
        return major >= 16 ? 4 : major == 15 ? 3 : 2;
    }

    static PgOutputScenario byId(String id) {
        for (PgOutputScenario s : values()) {
            if (s.id.equals(id)) {
                return s;
            }
        }
        throw new IllegalArgumentException("no scenario " + id);
    }

    static boolean wideColumnHasValue(int column) {
        return column == 1 || column % 100 == 0;
    }

    /** streaming: 'on' from protocol 2; 'parallel' at 4, which adds the abort LSN and time to Stream Abort. */
    private static Map<String, String> streaming(Map<String, String> options, int protocol) {
        if (protocol >= 4) {
            options.put("streaming", "parallel");
        } else if (protocol >= 2) {
            options.put("streaming", "on");
        }
        return options;
    }

    /** two_phase from protocol 3 (PostgreSQL 15). */
    private static Map<String, String> twoPhase(Map<String, String> options, int protocol) {
        if (protocol >= 3) {
            options.put("two_phase", "true");
        }
        return options;
    }
}
