package io.walhook.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import com.fasterxml.jackson.databind.JsonNode;

import io.walhook.pgoutput.Lsn;
import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.TestPostgres;
import io.walhook.checkpoint.PendingEvent;

/** The replication reader against a live PostgreSQL 17, with a test consumer in place of delivery. */
class ReplicationReaderTest {

    private static final Duration WAIT = Duration.ofSeconds(60);

    private static List<String> ops(List<JsonNode> events) {
        return events.stream().map(e -> e.get("op").asText() + " " + (e.get("table").isNull() ? "" : e.get("table").asText())).toList();
    }

    @Test
    void deliversRowChangesWithStableIdsInCommitOrder() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_rows")) {
            source.sql("CREATE TABLE orders (id int PRIMARY KEY, status text, amount numeric(10,2))");
            source.prepare("*");
            source.startReader();
            source.sql("INSERT INTO orders VALUES (1, 'new', 12.50), (2, 'new', 3)",
                    "UPDATE orders SET status = 'paid' WHERE id = 1",
                    "DELETE FROM orders WHERE id = 2");
            await().atMost(WAIT).until(() -> source.received.size() == 4);
            List<JsonNode> events = source.received;
            assertThat(ops(events)).containsExactly("insert orders", "insert orders", "update orders", "delete orders");

            JsonNode first = events.get(0);
            assertThat(first.get("schema").asText()).isEqualTo("public");
            assertThat(first.get("new").toString()).isEqualTo("{\"id\":1,\"status\":\"new\",\"amount\":12.50}");
            assertThat(first.get("old").isNull()).isTrue();
            String commitLsn = first.at("/tx/commit_lsn").asText();
            assertThat(first.get("id").asText()).isEqualTo(Lsn.parse(commitLsn).hex16() + "-0001");
            assertThat(events.get(1).get("id").asText()).isEqualTo(Lsn.parse(commitLsn).hex16() + "-0002");
            assertThat(first.at("/tx/seq").asInt()).isEqualTo(1);
            assertThat(first.at("/tx/commit_time").asText()).matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z");

            JsonNode update = events.get(2);
            assertThat(update.get("key").toString()).isEqualTo("{\"id\":1}");
            assertThat(update.get("new").toString()).isEqualTo("{\"id\":1,\"status\":\"paid\",\"amount\":12.50}");
            assertThat(update.at("/tx/xid").asLong()).isNotEqualTo(first.at("/tx/xid").asLong());

            JsonNode delete = events.get(3);
            assertThat(delete.get("key").toString()).isEqualTo("{\"id\":2}");
            assertThat(delete.get("new").isNull()).isTrue();

            assertThat(source.received.stream().map(e -> e.get("id").asText()).distinct().count()).isEqualTo(4);
        }
    }

    @Test
    void largeStreamedTransactionArrivesWholeOnceInOrderThroughTheSpillFile(@TempDir java.nio.file.Path spill)
            throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_stream")) {
            source.sql("CREATE TABLE big (id int PRIMARY KEY, payload text)",
                    "ALTER DATABASE " + source.database + " SET logical_decoding_work_mem = '64kB'");
            source.prepare("*");
            source.streamMemoryBytes = 1 << 20;
            source.spillDirectory = spill;
            ReplicationReader reader = source.startReader();
            source.sql("INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 200000) g");
            await().atMost(Duration.ofMinutes(3)).until(() -> source.received.size() >= 200000);
            await().during(Duration.ofSeconds(1)).atMost(WAIT).until(() -> source.received.size() == 200000);
            List<JsonNode> events = source.received;
            String commit = events.get(0).at("/tx/commit_lsn").asText();
            for (int i = 0; i < events.size(); i++) {
                JsonNode e = events.get(i);
                assertThat(e.at("/new/id").asInt()).isEqualTo(i + 1);
                assertThat(e.at("/tx/seq").asInt()).isEqualTo(i + 1);
                assertThat(e.at("/tx/commit_lsn").asText()).isEqualTo(commit);
            }
            assertThat(reader.status().spilledTransactions()).isPositive();
            assertThat(spill).isEmptyDirectory();
        }
    }

    @Test
    void aReaderStoppedInTheMiddleOfAStreamedTransactionLeavesItWholeToTheNextOne(@TempDir java.nio.file.Path spill)
            throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_midstream")) {
            source.sql("CREATE TABLE big (id int PRIMARY KEY, payload text)",
                    "ALTER DATABASE " + source.database + " SET logical_decoding_work_mem = '64kB'");
            source.prepare("*");
            source.streamMemoryBytes = 64 << 10;
            source.spillDirectory = spill;
            ReplicationReader first = source.startReader();
            try (java.sql.Connection c = source.dataSource.getConnection(); java.sql.Statement s = c.createStatement()) {
                c.setAutoCommit(false);
                s.execute("INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 20000) g");
                // the server streams the open transaction; the first reader holds part of it, spilled
                await().atMost(WAIT).until(() -> first.status().openStreams() > 0 && first.status().spilledTransactions() > 0);
                source.stopReader(first);
                assertThat(source.received).as("nothing of an uncommitted transaction is handed on").isEmpty();

                source.startReader();
                s.execute("INSERT INTO big SELECT g, md5(g::text) FROM generate_series(20001, 20100) g");
                c.commit();
            }
            source.sql("INSERT INTO big VALUES (0, 'marker')");
            await().atMost(Duration.ofMinutes(2)).until(() -> source.received.stream().anyMatch(e -> e.at("/new/id").asInt() == 0));
            List<Integer> ids = source.received.stream().map(e -> e.at("/new/id").asInt()).toList();
            assertThat(ids).hasSize(20101).doesNotHaveDuplicates();
            assertThat(ids.subList(0, 20100)).as("once each, in order").isSorted().startsWith(1).endsWith(20100);
            assertThat(source.received.subList(0, 20100)).extracting(e -> e.at("/tx/seq").asInt())
                    .as("seq counts from the transaction's first change, not from where the second reader came in")
                    .startsWith(1, 2, 3).endsWith(20100);
            assertThat(spill).as("the stopped reader's spill file is gone too").isEmptyDirectory();
        }
    }

    @Test
    void aTableAlteredInsideAStreamedTransactionIsReadRightWhetherItCommitsOrAborts() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_ddlstream")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY, a text)",
                    "ALTER DATABASE " + source.database + " SET logical_decoding_work_mem = '64kB'");
            source.prepare("*");
            source.startReader();
            // streamed, and its Relation message for the three-column table comes inside the stream: rolled back
            source.sql("BEGIN", "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 3000) g",
                    "ALTER TABLE t ADD COLUMN b int", "INSERT INTO t SELECT g, 'x', g FROM generate_series(3001, 6000) g",
                    "ROLLBACK");
            source.sql("INSERT INTO t VALUES (1, 'after abort')");
            await().atMost(WAIT).until(() -> source.received.size() == 1);
            assertThat(source.received.get(0).get("new").toString()).isEqualTo("{\"id\":1,\"a\":\"after abort\"}");

            // the same, committed: the new column from the transaction's own change on
            source.sql("BEGIN", "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(2, 3000) g",
                    "ALTER TABLE t ADD COLUMN b int", "INSERT INTO t SELECT g, 'x', g FROM generate_series(3001, 6000) g",
                    "COMMIT");
            source.sql("INSERT INTO t VALUES (7000, 'later', 7)");
            await().atMost(WAIT).until(() -> source.received.size() == 1 + 5999 + 1);
            assertThat(source.received.get(1).get("new").toString()).isEqualTo("{\"id\":2,\"a\":\"" + md5("2") + "\"}");
            assertThat(source.received.get(3000).get("new").toString()).isEqualTo("{\"id\":3001,\"a\":\"x\",\"b\":3001}");
            assertThat(source.received.get(6000).get("new").toString()).isEqualTo("{\"id\":7000,\"a\":\"later\",\"b\":7}");
        }
    }

    private static String md5(String text) throws Exception {
        byte[] digest = java.security.MessageDigest.getInstance("MD5").digest(text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        return java.util.HexFormat.of().formatHex(digest);
    }

    @Test
    void abortedStreamedTransactionAndRolledBackSubtransactionDeliverNothing() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_abort")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY, note text)",
                    "ALTER DATABASE " + source.database + " SET logical_decoding_work_mem = '64kB'");
            source.prepare("*");
            source.startReader();
            source.sql("BEGIN", "INSERT INTO t SELECT g, 'aborted' FROM generate_series(1, 5000) g", "ROLLBACK");
            source.sql("BEGIN",
                    "INSERT INTO t SELECT g, 'kept' FROM generate_series(10001, 13000) g",
                    "SAVEPOINT s1",
                    "INSERT INTO t SELECT g, 'subaborted' FROM generate_series(20001, 23000) g",
                    "ROLLBACK TO SAVEPOINT s1",
                    "INSERT INTO t VALUES (30001, 'after')",
                    "COMMIT");
            source.sql("INSERT INTO t VALUES (40001, 'marker')");
            await().atMost(WAIT).until(() -> source.received.stream().anyMatch(e -> e.at("/new/id").asInt() == 40001));
            List<String> notes = source.received.stream().map(e -> e.at("/new/note").asText()).collect(Collectors.toList());
            assertThat(notes).doesNotContain("aborted", "subaborted");
            assertThat(notes.stream().filter("kept"::equals).count()).isEqualTo(3000);
            assertThat(notes).endsWith("after", "marker");
        }
    }

    @Test
    void commitPreparedDeliversAndRollbackPreparedDoesNot() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_2pc")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            source.startReader();
            source.sql("BEGIN", "INSERT INTO t VALUES (1)", "PREPARE TRANSACTION 'keep'");
            source.sql("BEGIN", "INSERT INTO t VALUES (2)", "PREPARE TRANSACTION 'drop'");
            source.sql("ROLLBACK PREPARED 'drop'", "COMMIT PREPARED 'keep'", "INSERT INTO t VALUES (3)");
            await().atMost(WAIT).until(() -> source.received.size() >= 2);
            await().during(Duration.ofMillis(500)).atMost(WAIT).until(() -> source.received.size() == 2);
            assertThat(source.received.stream().map(e -> e.at("/new/id").asInt())).containsExactly(1, 3);
        }
    }

    @Test
    void truncatesAndLogicalMessagesBecomeEvents() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_trunc")) {
            source.sql("CREATE TABLE parent (id serial PRIMARY KEY)",
                    "CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent)");
            source.prepare("*");
            source.startReader();
            source.sql("INSERT INTO parent DEFAULT VALUES",
                    "TRUNCATE parent, child RESTART IDENTITY CASCADE",
                    "SELECT pg_logical_emit_message(true, 'audit', 'tx message')",
                    "SELECT pg_logical_emit_message(false, 'beacon', '\\xff00'::bytea)");
            await().atMost(WAIT).until(() -> source.received.size() == 5);
            List<JsonNode> events = source.received;
            assertThat(ops(events)).containsExactly("insert parent", "truncate parent", "truncate child",
                    "message ", "message ");
            assertThat(events.get(1).get("truncate").toString()).isEqualTo("{\"cascade\":true,\"restart_identity\":true}");
            assertThat(events.get(1).at("/tx/commit_lsn")).isEqualTo(events.get(2).at("/tx/commit_lsn"));
            JsonNode tx = events.get(3);
            assertThat(tx.get("schema").isNull()).isTrue();
            assertThat(tx.get("message").toString())
                    .isEqualTo("{\"prefix\":\"audit\",\"content\":\"tx message\",\"transactional\":true}");
            JsonNode beacon = events.get(4);
            assertThat(beacon.get("message").toString()).isEqualTo(
                    "{\"prefix\":\"beacon\",\"content\":\"/wA=\",\"content_encoding\":\"base64\",\"transactional\":false}");
            assertThat(beacon.get("id").asText()).endsWith("-0000");
        }
    }

    @Test
    void aNonTransactionalMessageOfARolledBackTransactionIsDeliveredAndAcknowledgedAndItsRowsAreNot() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_beacon")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            source.startReader();
            source.sql("BEGIN", "INSERT INTO t VALUES (1)",
                    "SELECT pg_logical_emit_message(false, 'progress', 'half way')", "ROLLBACK");
            await().atMost(WAIT).until(() -> source.received.size() == 1);
            JsonNode beacon = source.received.get(0);
            assertThat(beacon.get("message").toString())
                    .isEqualTo("{\"prefix\":\"progress\",\"content\":\"half way\",\"transactional\":false}");
            // its own position, past which the slot moves once it is delivered
            Lsn at = Lsn.parse(beacon.get("lsn").asText());
            await().atMost(WAIT).until(() -> source.confirmedFlush().compareTo(at) > 0);
            source.sql("INSERT INTO t VALUES (2)");
            await().atMost(WAIT).until(() -> source.received.size() == 2);
            assertThat(source.received.get(1).at("/new/id").asInt()).as("the rolled-back row never arrives").isEqualTo(2);
        }
    }

    @Test
    void aNonTransactionalMessageInsideAnOpenTransactionDoesNotAcknowledgeThatTransaction() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_progress")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            // the message is delivered at once; the transaction around it is not (a slow receiver)
            source.holdWhen = event -> event.get("op").asText().equals("insert");
            ReplicationReader first = source.startReader();
            source.sql("BEGIN", "INSERT INTO t SELECT generate_series(1, 10)",
                    "SELECT pg_logical_emit_message(false, 'progress', 'x')", "COMMIT");
            await().atMost(WAIT).until(() -> source.received.size() == 11);
            JsonNode message = source.received.get(0);
            assertThat(message.get("op").asText()).isEqualTo("message");
            Lsn messageAt = Lsn.parse(message.get("lsn").asText());
            Lsn commit = Lsn.parse(source.received.get(1).at("/tx/commit_lsn").asText());
            // the message's record ends where the transaction's commit record starts
            await().atMost(WAIT).until(() -> first.status().acknowledged().compareTo(messageAt) >= 0);
            assertThat(first.status().acknowledged()).as("acknowledged no further than the undelivered commit")
                    .isLessThanOrEqualTo(commit);
            source.stopReader(first); // a crash before the rows were delivered

            source.received.clear();
            source.holdWhen = event -> false;
            source.startReader();
            await().atMost(WAIT).until(() -> source.received.stream().filter(e -> e.get("op").asText().equals("insert"))
                    .count() == 10);
            assertThat(source.received).noneMatch(e -> e.get("op").asText().equals("message"));
        }
    }

    @Test
    void aHandOffBrokenWhileDeliveryIsFullStillLetsTheSlotAdvance() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_brokenfull")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            source.handoffCapacity = 10;
            source.paused = true;
            ReplicationReader reader = source.startReader();
            await().atMost(WAIT).until(() -> reader.status().state() == SourceStatus.State.STREAMING);
            Lsn before = Lsn.parse(source.queryOne("SELECT pg_current_wal_lsn()::text"));
            source.sql("INSERT INTO t SELECT generate_series(1, 500)");
            Lsn after = Lsn.parse(source.queryOne("SELECT pg_current_wal_lsn()::text"));
            await().atMost(WAIT).until(() -> reader.events().remainingCapacity() == 0);
            // the walsender goes away while the reader waits on the full hand-off: its next status fails
            source.sql("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '"
                    + source.slot + "'");
            await().atMost(WAIT).until(() -> reader.status().state() != SourceStatus.State.STREAMING);
            // what was handed on of the transaction cut off counts as read of the server's history (reached)
            assertThat(reader.handedOnPart()).isGreaterThan(before).isLessThan(after);
            source.paused = false;
            await().atMost(WAIT).until(() -> reader.status().state() == SourceStatus.State.STREAMING);
            source.sql("INSERT INTO t VALUES (1000)");
            await().atMost(WAIT).until(() -> source.received.stream().anyMatch(e -> e.at("/new/id").asInt() == 1000));
            Lsn last = Lsn.parse(source.received.stream().filter(e -> e.at("/new/id").asInt() == 1000).findFirst()
                    .orElseThrow().at("/tx/commit_lsn").asText());
            await().atMost(WAIT).until(() -> source.confirmedFlush().compareTo(last) > 0);
            assertThat(reader.status().pendingTransactions()).isZero();
        }
    }

    @Test
    void reconnectsPromptlyAfterEachBlipOnceStreamingHadWorked() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_blips")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            source.reconnectMaxBackoff = Duration.ofSeconds(30);
            source.startReader();
            String walsender = null;
            for (int blip = 1; blip <= 7; blip++) {
                String before = walsender;
                // each connection streams (a change arrives through it) before it is broken; the sixth
                // reconnect is timed: the backoff started over each time (at most 1 s), where six
                // doublings would wait 15 to 30 s
                await().atMost(blip == 7 ? Duration.ofSeconds(5) : WAIT).until(() -> {
                    String now = activeWalsender(source);
                    return now != null && !now.equals(before);
                });
                walsender = activeWalsender(source);
                int row = blip;
                source.sql("INSERT INTO t VALUES (" + row + ")");
                await().atMost(WAIT).until(() -> source.received.stream().anyMatch(e -> e.at("/new/id").asInt() == row));
                if (blip < 7) {
                    source.sql("SELECT pg_terminate_backend(" + walsender + ")");
                }
            }
        }
    }

    @Test
    void aConnectionClosedWithoutAnErrorIsReconnectedAndNothingIsLost() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_fin");
                io.walhook.testing.TcpProxy proxy = io.walhook.testing.TcpProxy.to(TestPostgres.shared().host(),
                        TestPostgres.shared().port())) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            source.replicationUrl = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/" + source.database;
            // nothing written to the connection for a minute: only noticing the end of the stream reconnects sooner
            source.statusInterval = Duration.ofSeconds(60);
            source.checkpointInterval = Duration.ofSeconds(60);
            ReplicationReader reader = source.startReader();
            for (int round = 0; round < 3; round++) {
                int first = round * 20 + 1;
                source.sql("INSERT INTO t SELECT g FROM generate_series(" + first + ", " + (first + 9) + ") g");
                await().atMost(WAIT).until(() -> source.received.stream().anyMatch(e -> e.at("/new/id").asInt() == first + 9));
                // as a load balancer drops an idle connection: FIN on both sides, no error from the server
                int before = proxy.connections();
                proxy.dropAll();
                source.sql("INSERT INTO t SELECT g FROM generate_series(" + (first + 10) + ", " + (first + 19) + ") g");
                await().atMost(Duration.ofSeconds(20)).until(() -> proxy.connections() > before);
            }
            await().atMost(WAIT).until(() -> source.received.stream().map(e -> e.at("/new/id").asInt())
                    .collect(Collectors.toSet()).size() == 60);
            assertThat(reader.status().state()).isEqualTo(SourceStatus.State.STREAMING);
        }
    }

    @Test
    void aConnectionThatGoesSilentIsGivenUpAndReconnectedAndNothingIsLost() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_silent");
                io.walhook.testing.TcpProxy proxy = io.walhook.testing.TcpProxy.to(TestPostgres.shared().host(),
                        TestPostgres.shared().port())) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            source.replicationUrl = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/" + source.database;
            source.statusInterval = Duration.ofSeconds(1);
            // how long the server may take to answer a request for a reply counts: walhook waits that long and more
            source.sql("ALTER DATABASE " + source.database + " SET wal_sender_timeout = '2s'");
            ReplicationReader reader = source.startReader();
            source.sql("INSERT INTO t SELECT g FROM generate_series(1, 10) g");
            await().atMost(WAIT).until(() -> source.received.size() == 10);
            // a network partition: the connection stays open, and nothing passes any more, either way
            int before = proxy.connections();
            proxy.silenceAll();
            source.sql("INSERT INTO t SELECT g FROM generate_series(11, 20) g");
            // given up by walhook (the server's end, after its wal_sender_timeout, does not reach it across the
            // partition) and connected again once the server let the slot go
            await().atMost(Duration.ofSeconds(30)).until(() -> proxy.connections() > before);
            await().atMost(WAIT).until(() -> source.received.stream().map(e -> e.at("/new/id").asInt())
                    .collect(Collectors.toSet()).size() == 20);
        }
    }

    /**
     * A failover cuts the replication connection half-open in the middle of a message: the reader
     * holds its start and waits for the rest, which never comes. It gives the connection up after
     * the server's reply patience, as it does one silent between messages, and reconnects.
     */
    @Test
    void aConnectionCutHalfOpenInTheMiddleOfAMessageIsGivenUpAndReconnectedAndNothingIsLost() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_cut");
                io.walhook.testing.TcpProxy proxy = io.walhook.testing.TcpProxy.to(TestPostgres.shared().host(),
                        TestPostgres.shared().port())) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY, note text)");
            source.prepare("*");
            source.replicationUrl = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/" + source.database;
            source.statusInterval = Duration.ofSeconds(1);
            source.sql("ALTER DATABASE " + source.database + " SET wal_sender_timeout = '2s'");
            ReplicationReader reader = source.startReader();
            source.sql("INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 10) g");
            await().atMost(WAIT).until(() -> source.received.size() == 10);
            for (int round = 1; round <= 2; round++) {
                int before = proxy.connections();
                int first = round * 10 + 1;
                proxy.loseServerMidMessage();
                source.sql("INSERT INTO t SELECT g, 'row ' || g FROM generate_series(" + first + ", " + (first + 9) + ") g");
                // the reader held one byte of the next message (a change or a keepalive) and waited for the rest
                await().atMost(Duration.ofSeconds(30)).until(() -> proxy.connections() > before);
                await().atMost(WAIT).until(() -> source.received.stream().map(e -> e.at("/new/id").asInt())
                        .collect(Collectors.toSet()).size() == first + 9);
            }
            assertThat(reader.status().state()).isEqualTo(SourceStatus.State.STREAMING);
        }
    }

    private static String activeWalsender(SourceFixture source) throws java.sql.SQLException {
        return source.queryOne("SELECT active_pid FROM pg_replication_slots WHERE slot_name = '" + source.slot + "'");
    }

    @Test
    void anUpdateThatChangesTheKeyCarriesTheOldKey() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_rekey")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY, note text)", "INSERT INTO t VALUES (1, 'n')");
            source.prepare("*");
            source.startReader();
            source.sql("UPDATE t SET id = 2 WHERE id = 1", "UPDATE t SET note = 'm' WHERE id = 2");
            await().atMost(WAIT).until(() -> source.received.size() == 2);
            JsonNode rekey = source.received.get(0);
            assertThat(rekey.get("op").asText()).isEqualTo("update");
            assertThat(rekey.get("key").toString()).isEqualTo("{\"id\":1}");
            assertThat(rekey.get("new").toString()).isEqualTo("{\"id\":2,\"note\":\"n\"}");
            // the key unchanged: the new row's key
            assertThat(source.received.get(1).get("key").toString()).isEqualTo("{\"id\":2}");
        }
    }

    /**
     * A key stored out of line and left as it was: the server sends it in the 'K' tuple and marks
     * it unchanged in the new row. The event's new row holds it, as a filter sees it, and it is not
     * called unchanged (the contract's unchanged are values the server did not send); the update
     * is ordered as one of the same row. The new row lacked it.
     */
    @Test
    void aKeyStoredOutOfLineAndKeptIsInTheNewRow() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_toast_key")) {
            String big = "(SELECT string_agg(md5(g::text), '' ORDER BY g) FROM generate_series(1, 80) g)";
            source.sql("CREATE TABLE toast_key (k text PRIMARY KEY, v int)",
                    "ALTER TABLE toast_key ALTER COLUMN k SET STORAGE EXTERNAL",
                    "INSERT INTO toast_key VALUES (" + big + ", 1)");
            source.prepare("*");
            source.startReader();
            source.sql("UPDATE toast_key SET v = 2");
            await().atMost(WAIT).until(() -> source.received.size() == 1);
            JsonNode update = source.received.get(0);
            assertThat(update.at("/key/k").asText()).hasSize(80 * 32);
            assertThat(update.at("/new/k").asText()).isEqualTo(update.at("/key/k").asText());
            assertThat(update.at("/new/v").asInt()).isEqualTo(2);
            assertThat(update.has("unchanged")).as(update.toString()).isFalse();
        }
    }

    @Test
    void unchangedToastIsMarkedUnderDefaultAndFilledUnderFull() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_toast")) {
            String big = "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 4000) g)";
            source.sql("CREATE TABLE d (id int PRIMARY KEY, status text, doc text)",
                    "CREATE TABLE f (id int PRIMARY KEY, status text, doc text)",
                    "ALTER TABLE f REPLICA IDENTITY FULL",
                    "INSERT INTO d VALUES (1, 'new', " + big + ")",
                    "INSERT INTO f VALUES (1, 'new', " + big + ")");
            source.prepare("*");
            source.startReader();
            source.sql("UPDATE d SET status = 'paid'", "UPDATE f SET status = 'paid'");
            await().atMost(WAIT).until(() -> source.received.size() == 2);
            JsonNode d = source.received.get(0);
            assertThat(d.get("new").has("doc")).isFalse();
            assertThat(d.get("unchanged").toString()).isEqualTo("[\"doc\"]");
            assertThat(d.get("old").isNull()).isTrue();
            JsonNode f = source.received.get(1);
            assertThat(f.at("/new/doc").asText()).hasSize(4000 * 32);
            assertThat(f.has("unchanged")).isFalse();
            assertThat(f.at("/old/status").asText()).isEqualTo("new");
            assertThat(f.at("/old/doc").asText()).isEqualTo(f.at("/new/doc").asText());
        }
    }

    @Test
    void unacknowledgedEventsAreRedeliveredWithTheSameIdsAndAcknowledgedOnesAreNot() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_redeliver")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            source.hold(true);
            ReplicationReader first = source.startReader();
            source.sql("INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2)");
            await().atMost(WAIT).until(() -> source.received.size() == 2);
            List<String> ids = source.received.stream().map(e -> e.get("id").asText()).toList();
            source.stopReader(first); // the consumer "dies" before acknowledging
            assertThat(source.checkpoints.load(source.slot).orElse(Lsn.INVALID))
                    .isLessThan(Lsn.parse(source.received.get(0).at("/tx/commit_lsn").asText()));

            source.received.clear();
            source.hold(false);
            ReplicationReader second = source.startReader();
            await().atMost(WAIT).until(() -> source.received.size() == 2);
            assertThat(source.received.stream().map(e -> e.get("id").asText()).toList()).isEqualTo(ids);
            await().atMost(WAIT).until(() -> second.status().acknowledged().compareTo(
                    Lsn.parse(source.received.get(1).at("/tx/commit_lsn").asText())) > 0);
            source.stopReader(second);

            source.received.clear();
            source.startReader();
            source.sql("INSERT INTO t VALUES (3)");
            await().atMost(WAIT).until(() -> source.received.size() >= 1);
            await().during(Duration.ofMillis(500)).atMost(WAIT).until(() -> source.received.size() == 1);
            assertThat(source.received.get(0).at("/new/id").asInt()).isEqualTo(3);
        }
    }

    @Test
    void idleDatabaseSlotAdvancesWhileAnotherDatabaseWrites() throws Exception {
        try (SourceFixture idle = new SourceFixture(TestPostgres.shared(), "reader_idle");
             SourceFixture busy = new SourceFixture(TestPostgres.shared(), "reader_busy")) {
            idle.prepare("*");
            ReplicationReader reader = idle.startReader();
            Lsn before = idle.confirmedFlush();
            busy.sql("CREATE TABLE noise (id int)");
            for (int i = 0; i < 5; i++) {
                busy.sql("INSERT INTO noise SELECT generate_series(1, 1000)");
            }
            // the walsender reports its position in keepalives; walhook acknowledges it with nothing pending
            await().atMost(WAIT).until(() -> idle.confirmedFlush().compareTo(before) > 0);
            assertThat(idle.received).isEmpty();
            // /status's received_lsn: the keepalives' position too, not 0/0 while nothing of its database came
            assertThat(reader.status().received().compareTo(before)).as(reader.status().received().toString())
                    .isGreaterThan(0);
        }
    }

    @Test
    void aStreamedTransactionLeftOpenDoesNotFreezeTheSlotAndArrivesWholeWhenItCommits() throws Exception {
        try (SourceFixture open = new SourceFixture(TestPostgres.shared(), "reader_openstream");
             SourceFixture busy = new SourceFixture(TestPostgres.shared(), "reader_noise")) {
            open.sql("CREATE TABLE big (id int PRIMARY KEY, payload text)",
                    "ALTER DATABASE " + open.database + " SET logical_decoding_work_mem = '64kB'");
            open.prepare("*");
            ReplicationReader reader = open.startReader();
            busy.sql("CREATE TABLE noise (id int)");
            try (java.sql.Connection c = open.dataSource.getConnection(); java.sql.Statement s = c.createStatement()) {
                c.setAutoCommit(false);
                s.execute("INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 5000) g");
                await().atMost(WAIT).until(() -> reader.status().openStreams() > 0);
                // a long-open transaction (say, prepared and awaiting COMMIT PREPARED) while the cluster
                // writes elsewhere: the slot still follows the server's position
                Lsn before = open.confirmedFlush();
                for (int i = 0; i < 5; i++) {
                    busy.sql("INSERT INTO noise SELECT generate_series(1, 1000)");
                }
                await().atMost(WAIT).until(() -> open.confirmedFlush().compareTo(before) > 0);
                assertThat(open.received).isEmpty();
                // and a reader that comes back after that position was acknowledged still gets it whole
                open.stopReader(reader);
                open.startReader();
                c.commit();
            }
            await().atMost(WAIT).until(() -> open.received.size() >= 5000);
            await().during(Duration.ofMillis(500)).atMost(WAIT).until(() -> open.received.size() == 5000);
            assertThat(open.received).extracting(e -> e.at("/new/id").asInt()).startsWith(1).endsWith(5000).isSorted();
        }
    }

    @Test
    void resumesWithNothingLostWhenPostgresRestartsMidStream() throws Exception {
        EmbeddedPostgres pg = EmbeddedPostgres.builder().major(TestPostgres.defaultMajor()).start();
        try (SourceFixture source = new SourceFixture(pg, "reader_restart")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            ReplicationReader reader = source.startReader();
            for (int i = 1; i <= 100; i++) {
                source.sql("INSERT INTO t VALUES (" + i + ")");
            }
            pg.restart();
            for (int i = 101; i <= 200; i++) {
                source.sql("INSERT INTO t VALUES (" + i + ")");
            }
            await().atMost(WAIT).until(() -> source.received.stream().map(e -> e.at("/new/id").asInt())
                    .collect(Collectors.toSet()).size() == 200);
            // redelivery after the restart is allowed, but a change always keeps its id
            java.util.Map<Integer, java.util.Set<String>> idsByRow = source.received.stream().collect(Collectors.groupingBy(
                    e -> e.at("/new/id").asInt(), Collectors.mapping(e -> e.get("id").asText(), Collectors.toSet())));
            assertThat(idsByRow.values()).allSatisfy(ids -> assertThat(ids).hasSize(1));
            assertThat(reader.status().state()).isEqualTo(SourceStatus.State.STREAMING);
        } finally {
            pg.stop();
        }
    }

    @Test
    void droppedSlotIsReportedLoudlyAndNeverRecreated() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_dropped")) {
            source.prepare("*");
            ReplicationReader reader = source.startReader();
            await().atMost(WAIT).until(() -> reader.status().state() == SourceStatus.State.STREAMING);
            await().atMost(WAIT).ignoreExceptions().until(() -> {
                source.sql("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
                        + " WHERE slot_name = '" + source.slot + "' AND active_pid IS NOT NULL");
                source.sql("SELECT pg_drop_replication_slot('" + source.slot + "')");
                return true;
            });
            await().atMost(WAIT).until(() -> reader.status().state() == SourceStatus.State.SLOT_INVALID);
            assertThat(reader.status().lastError()).contains(source.slot).contains("does not exist");
            assertThat(source.queryOne("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + source.slot + "'"))
                    .isEqualTo("0");
        }
    }

    @Test
    void slotGoneAfterAcknowledgementsStopsSetupWithTheFix() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_gone")) {
            source.checkpoints.save(source.slot, Lsn.parse("0/1000000"), io.walhook.checkpoint.Timeline.UNKNOWN);
            assertThatThrownBy(() -> source.prepare("*")).isInstanceOf(SourceSetupException.class)
                    .hasMessageContaining("replication slot " + source.slot + " is gone")
                    .hasMessageContaining("0/1000000")
                    .hasMessageContaining("DELETE FROM");
        }
    }

    @Test
    void valuesArriveAsTheContractPinsThemWhateverTheServerTimeZone() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_values")) {
            source.sql("ALTER DATABASE " + source.database + " SET timezone = 'Asia/Kolkata'",
                    "ALTER DATABASE " + source.database + " SET datestyle = 'SQL, DMY'",
                    "ALTER DATABASE " + source.database + " SET extra_float_digits = 0",
                    "ALTER DATABASE " + source.database + " SET bytea_output = 'escape'",
                    "CREATE TYPE mood AS ENUM ('sad', 'happy')",
                    "CREATE TABLE v (id int8 PRIMARY KEY, i2 int2, f8 float8, f4 float4, n numeric, b bool, j jsonb,"
                            + " js json, ia int4[], ta text[], ba bytea, tz timestamptz, ts timestamp, d date, t time,"
                            + " u uuid, txt text, m mood, iv interval)");
            source.prepare("*");
            source.startReader();
            source.sql("SET timezone = 'Asia/Kolkata'",
                    "INSERT INTO v VALUES (9007199254740993, -32768, 'NaN', 1.5, 12345678901234567890.123456789012,"
                    + " true, '{\"a\": [1, 2.50, null]}', '{\"k\":  \"v\"}', '{1,NULL,3}', '{\"NULL\",NULL,\"x,y\"}',"
                    + " '\\xdeadbeef', '2026-11-29 21:30:00.123456+05:30', '2026-11-29 16:00:00', '2026-11-29',"
                    + " '16:00:00.5', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'ünïcødé \"q\" \t', 'happy', '1 day 02:00:00')",
                    "INSERT INTO v (id, f8, f4, n, tz) VALUES (2, 'Infinity', '-Infinity', 'NaN', 'infinity')");
            await().atMost(WAIT).until(() -> source.received.size() == 2);
            JsonNode row = source.received.get(0).get("new");
            assertThat(row.toString()).isEqualTo("{\"id\":9007199254740993,\"i2\":-32768,\"f8\":\"NaN\",\"f4\":1.5,"
                    + "\"n\":12345678901234567890.123456789012,\"b\":true,\"j\":{\"a\":[1,2.50,null]},\"js\":{\"k\":\"v\"},"
                    + "\"ia\":[1,null,3],\"ta\":[\"NULL\",null,\"x,y\"],\"ba\":\"3q2+7w==\","
                    + "\"tz\":\"2026-11-29T16:00:00.123456Z\",\"ts\":\"2026-11-29T16:00:00\",\"d\":\"2026-11-29\","
                    + "\"t\":\"16:00:00.5\",\"u\":\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\","
                    + "\"txt\":\"ünïcødé \\\"q\\\" \\t\",\"m\":\"happy\",\"iv\":\"1 day 02:00:00\"}");
            JsonNode special = source.received.get(1).get("new");
            assertThat(special.get("f8").asText()).isEqualTo("Infinity");
            assertThat(special.get("f4").asText()).isEqualTo("-Infinity");
            assertThat(special.get("n").asText()).isEqualTo("NaN");
            assertThat(special.get("tz").asText()).isEqualTo("infinity");
            assertThat(special.get("i2").isNull()).isTrue();
        }
    }

    @org.junit.jupiter.params.ParameterizedTest(name = "PostgreSQL {0}")
    @org.junit.jupiter.params.provider.ValueSource(ints = {14, 15, 16, 17, 18})
    void protocolCasesHoldOnEverySupportedMajor(int major) throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(major), "reader_matrix")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY, note text)",
                    "ALTER DATABASE " + source.database + " SET logical_decoding_work_mem = '64kB'");
            source.prepare("*");
            source.startReader();
            source.sql("BEGIN",
                    "INSERT INTO t SELECT g, 'kept' FROM generate_series(1, 2000) g",
                    "SAVEPOINT s1",
                    "INSERT INTO t SELECT g, 'subaborted' FROM generate_series(5001, 7000) g",
                    "ROLLBACK TO SAVEPOINT s1",
                    "COMMIT");
            source.sql("BEGIN", "INSERT INTO t SELECT g, 'aborted' FROM generate_series(8001, 10000) g", "ROLLBACK");
            source.sql("BEGIN", "INSERT INTO t VALUES (20001, 'prepared')", "PREPARE TRANSACTION 'p1'");
            source.sql("BEGIN", "INSERT INTO t VALUES (20002, 'rolled back')", "PREPARE TRANSACTION 'p2'");
            source.sql("ROLLBACK PREPARED 'p2'", "COMMIT PREPARED 'p1'",
                    "SELECT pg_logical_emit_message(true, 'm', 'end')", "TRUNCATE t");
            await().atMost(WAIT).until(() -> source.received.size() == 2003);
            List<JsonNode> events = source.received;
            assertThat(events.subList(0, 2000)).allSatisfy(e -> assertThat(e.at("/new/note").asText()).isEqualTo("kept"));
            assertThat(events.get(1999).at("/tx/seq").asInt()).isEqualTo(2000);
            assertThat(events.get(2000).at("/new/note").asText()).isEqualTo("prepared");
            assertThat(events.get(2001).at("/message/content").asText()).isEqualTo("end");
            assertThat(events.get(2002).get("op").asText()).isEqualTo("truncate");
        }
    }

    @Test
    void fullHandOffKeepsAnsweringTheServerPastItsTimeout() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_pressure")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)",
                    "ALTER DATABASE " + source.database + " SET wal_sender_timeout = '2s'");
            source.prepare("*");
            source.handoffCapacity = 10;
            source.paused = true;
            ReplicationReader reader = source.startReader();
            await().atMost(WAIT).until(() -> reader.status().state() == SourceStatus.State.STREAMING);
            String walsender = activeWalsender(source);
            assertThat(source.queryOne("SELECT setting FROM pg_settings WHERE name = 'wal_sender_timeout'")).isEqualTo("2000");
            source.sql("INSERT INTO t SELECT generate_series(1, 500)");
            await().atMost(WAIT).until(() -> reader.events().remainingCapacity() == 0);
            // three server timeouts with delivery stalled: the server must keep the same walsender
            await().during(Duration.ofSeconds(6)).atMost(WAIT).until(() -> walsender.equals(
                    activeWalsender(source)));
            source.paused = false;
            await().atMost(WAIT).until(() -> source.received.size() == 500);
            assertThat(source.received.stream().map(e -> e.get("id").asText()).distinct().count()).isEqualTo(500);
        }
    }

    /**
     * Draining (a SIGTERM's grace period), the reader reads nothing more: it kept quiet, and the
     * server ended the stream after its wal_sender_timeout, so deliveries that finished later in
     * the grace period were not acknowledged, and were sent again after the restart. It tells the
     * server it is there every second.
     */
    @Test
    void aDrainLongerThanTheServersTimeoutKeepsTheStream() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_drain")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)",
                    "ALTER DATABASE " + source.database + " SET wal_sender_timeout = '2s'");
            source.prepare("*");
            source.hold(true); // delivery never finishes: the drain waits out its grace period
            ReplicationReader reader = source.startReader();
            await().atMost(WAIT).until(() -> reader.status().state() == SourceStatus.State.STREAMING);
            String walsender = activeWalsender(source);
            source.sql("INSERT INTO t VALUES (1)");
            await().atMost(WAIT).until(() -> source.received.size() == 1);
            java.util.concurrent.CompletableFuture<Void> drained = java.util.concurrent.CompletableFuture.runAsync(() -> {
                try {
                    reader.drain(Duration.ofSeconds(30)); // far past the look below: the stream stays while it lasts
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            // three server timeouts into the drain: the same walsender
            await().during(Duration.ofSeconds(6)).atMost(WAIT).until(() -> walsender.equals(
                    activeWalsender(source)));
            drained.get(90, TimeUnit.SECONDS);
        }
    }

    @Test
    void twoPhaseSlotIsRefusedWithTheFix() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_twophase")) {
            source.sql("SELECT pg_create_logical_replication_slot('" + source.slot + "', 'pgoutput', false, true)");
            assertThatThrownBy(() -> source.prepare("*")).isInstanceOf(SourceSetupException.class)
                    .hasMessageContaining("two_phase enabled")
                    .hasMessageContaining("choose another WALHOOK_SLOT");
        }
    }

    @Test
    void theCheckpointFollowsTheAcknowledgedPositionWhenTheLastEventsCompleteLater() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_late")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            List<PendingEvent> taken = new java.util.concurrent.CopyOnWriteArrayList<>();
            ReplicationReader reader = source.startReader(r -> () -> {
                try {
                    while (!Thread.currentThread().isInterrupted()) {
                        PendingEvent pending = r.events().poll(100, TimeUnit.MILLISECONDS);
                        if (pending != null) {
                            taken.add(pending);
                        }
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            source.sql("INSERT INTO t VALUES (1)");
            source.sql("INSERT INTO t VALUES (2)");
            await().atMost(WAIT).until(() -> taken.size() == 2);
            Lsn first = taken.get(0).event().tx().commitLsn();
            Lsn second = taken.get(1).event().tx().commitLsn();

            reader.tracker().complete(taken.get(0).ticket(), 1);
            await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).orElse(Lsn.INVALID).compareTo(first) > 0);
            // the second completes with no event after it: the server is told, and so is the checkpoint
            reader.tracker().complete(taken.get(1).ticket(), 1);
            await().atMost(WAIT).until(() -> source.confirmedFlush().compareTo(second) > 0);
            await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).orElse(Lsn.INVALID).compareTo(second) > 0);
        }
    }

    /**
     * A transaction whose changes were written before another's commit, and whose events were all
     * handed on before its own Commit arrived: the acknowledgement round between them saw every event
     * and the stream read only up to those changes, below the checkpoint the other had saved. After
     * the Commit the server was told its end and the checkpoint was not (a restart read it again; with
     * a failover, worse). A transaction's events count as read up to its end. The round falls between
     * the last event and the Commit once in 64 messages: transactions of 1 to 64 changes.
     */
    @Test
    void theCheckpointCoversATransactionWhoseEventsWereHandedOnBeforeItsCommit() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_handed_early")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            source.handoffBytes = 4; // each event handed on as it is read
            source.checkpointInterval = Duration.ZERO;
            java.util.concurrent.atomic.AtomicReference<Lsn> lastCommit = new java.util.concurrent.atomic.AtomicReference<>(Lsn.INVALID);
            java.util.concurrent.atomic.AtomicInteger seen = new java.util.concurrent.atomic.AtomicInteger();
            source.startReader(r -> () -> {
                try {
                    while (!Thread.currentThread().isInterrupted()) {
                        PendingEvent pending = r.events().poll(100, TimeUnit.MILLISECONDS);
                        if (pending != null) {
                            lastCommit.set(pending.event().tx().commitLsn());
                            r.tracker().complete(pending.ticket(), 1);
                            seen.incrementAndGet();
                        }
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            int id = 0;
            for (int changes = 1; changes <= 64; changes++) {
                try (java.sql.Connection open = source.dataSource.getConnection(); java.sql.Statement s = open.createStatement()) {
                    open.setAutoCommit(false);
                    for (int i = 0; i < changes; i++) {
                        s.execute("INSERT INTO t VALUES (" + ++id + ")");
                    }
                    source.sql("INSERT INTO t VALUES (" + ++id + ")"); // committed first: its checkpoint is past those changes
                    int before = id - changes;
                    await().atMost(WAIT).until(() -> seen.get() == before
                            && source.checkpoints.load(source.slot).orElse(Lsn.INVALID).compareTo(lastCommit.get()) > 0);
                    open.commit();
                }
                int all = id;
                await().atMost(WAIT).until(() -> seen.get() == all && source.confirmedFlush().compareTo(lastCommit.get()) > 0);
                Lsn transaction = lastCommit.get();
                int count = changes;
                await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(source.checkpoints.load(source.slot)
                        .orElse(Lsn.INVALID)).as("the checkpoint, the server told past the transaction of %d changes", count)
                        .isGreaterThan(transaction));
            }
        }
    }

    /**
     * A stream the server breaks with an error quoting a row's value (a publication's row filter that
     * fails on it): the reader's {@code last_error}, which /status shows every read-token holder, and
     * its log line show the message with the value left out, as a backfill's error does.
     */
    @Test
    void aStreamErrorQuotingARowsValueIsShownWithoutIt() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_error_value")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY, v text)",
                    "CREATE PUBLICATION walhook FOR TABLE t WHERE (length(decode(v, 'hex')) > 0)");
            source.prepare("public.t");
            ReplicationReader reader = source.startReader();
            source.sql("INSERT INTO t VALUES (1, 'q23-45-6789')");
            await().atMost(WAIT).until(() -> reader.status().lastError() != null);
            assertThat(reader.status().lastError()).contains("invalid hexadecimal digit").doesNotContain("\"q\"")
                    .contains("SQLSTATE 22023");
        }
    }

    /**
     * Another session holding the checkpoint's row (an operator's open transaction): the stream goes
     * on, nothing acknowledged past the saved checkpoint, and the checkpoint catches up once the row
     * is free. Before, the save waited with the stream for as long as the row was held (without a
     * statement timeout, for good); breaking the stream instead read the same changes again.
     */
    @Test
    void aCheckpointRowHeldByAnotherSessionDoesNotHoldTheStream() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_held_checkpoint")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            ReplicationReader reader = source.startReader();
            source.sql("INSERT INTO t VALUES (0)");
            await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).isPresent());
            Lsn before = source.checkpoints.load(source.slot).orElseThrow();
            try (java.sql.Connection locker = source.dataSource.getConnection();
                    java.sql.PreparedStatement hold = locker.prepareStatement(
                            "SELECT * FROM walhook.checkpoint WHERE slot_name = ? FOR UPDATE")) {
                locker.setAutoCommit(false);
                hold.setString(1, source.slot);
                hold.executeQuery().close();
                for (int i = 1; i <= 30; i++) {
                    source.sql("INSERT INTO t VALUES (" + i + ")");
                }
                await().atMost(Duration.ofSeconds(20)).until(() -> source.received.size() >= 31);
                assertThat(source.checkpoints.load(source.slot)).contains(before);
                // nothing read while the row was held is acknowledged (positions between events may be)
                Lsn firstHeld = Lsn.parse(source.received.get(1).at("/tx/commit_lsn").asText());
                assertThat(source.confirmedFlush()).isLessThan(firstHeld);
                // and /status says why
                await().atMost(WAIT).untilAsserted(() -> assertThat(reader.status().lastError())
                        .startsWith("cannot save the checkpoint, so nothing is acknowledged: "));
                locker.rollback();
            }
            Lsn last = Lsn.parse(source.received.get(source.received.size() - 1).at("/tx/commit_lsn").asText());
            await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).orElseThrow().compareTo(last) > 0);
            await().atMost(WAIT).until(() -> source.confirmedFlush().compareTo(last) > 0);
            // read once: the stream did not break and start again from the old position
            assertThat(source.received).hasSize(31);
            assertThat(reader.status().lastError()).isNull();
        }
    }

    /**
     * The state database refusing the checkpoint's write while the source streams (read-only after
     * its failover, out of connections, a permission taken away): the stream broke at each try and
     * read the same changes again from the slot's old position, and a transaction that took longer
     * to read than the next try never came through. The stream goes on; nothing is acknowledged
     * until a save succeeds.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"25006", "53300", "42501"})
    void aCheckpointTheStateDatabaseRefusesDoesNotBreakTheStream(String state) throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_refused_checkpoint")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            ReplicationReader reader = source.startReader();
            source.sql("INSERT INTO t VALUES (0)");
            await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).isPresent());
            Lsn before = source.checkpoints.load(source.slot).orElseThrow();
            source.sql("CREATE FUNCTION walhook.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                    + " RAISE EXCEPTION 'refused' USING ERRCODE = '" + state + "'; END $$");
            source.sql("CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON walhook.checkpoint FOR EACH ROW"
                    + " EXECUTE FUNCTION walhook.refuse()");
            for (int i = 1; i <= 30; i++) {
                source.sql("INSERT INTO t VALUES (" + i + ")");
            }
            source.sql("INSERT INTO t SELECT g FROM generate_series(100, 20099) g"); // longer to read than a try
            await().atMost(Duration.ofSeconds(30)).until(() -> source.received.size() >= 20_031);
            await().atMost(WAIT).untilAsserted(() -> assertThat(reader.status().lastError())
                    .startsWith("cannot save the checkpoint, so nothing is acknowledged: "));
            assertThat(source.checkpoints.load(source.slot)).contains(before);
            Lsn firstRefused = Lsn.parse(source.received.get(1).at("/tx/commit_lsn").asText());
            assertThat(source.confirmedFlush()).isLessThan(firstRefused);
            source.sql("DROP TRIGGER refuse ON walhook.checkpoint");
            Lsn last = Lsn.parse(source.received.get(source.received.size() - 1).at("/tx/commit_lsn").asText());
            await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).orElseThrow().compareTo(last) > 0);
            await().atMost(WAIT).until(() -> source.confirmedFlush().compareTo(last) > 0);
            assertThat(source.received).as("read once: the stream did not break and start again").hasSize(20_031);
        }
    }

    /**
     * A failover, behind the same address, to a server whose WAL ends before what the reader had
     * read (an asynchronous standby promoted, its slot synchronized): the reader resumed at its own
     * positions, and the server skipped every new transaction committing below them, lost. Its
     * positions belong to another history: it stops (walhook exits, and starts again). Started
     * again, with a checkpoint past that server's WAL, it resumes from the slot's own position.
     */
    @Test
    void aServerWhoseWalEndsBeforeWhatWasReadIsNotReadFromTheOldServersPositions() throws Exception {
        io.walhook.testing.EmbeddedPostgres behind = io.walhook.testing.EmbeddedPostgres.builder()
                .major(TestPostgres.defaultMajor()).start();
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_history")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            behind.execute(behind.defaultDatabase(), "CREATE DATABASE " + source.database);
            behind.execute(source.database, "CREATE TABLE t (id int PRIMARY KEY)", "CREATE PUBLICATION walhook FOR ALL TABLES",
                    "SELECT pg_create_logical_replication_slot('" + source.slot + "', 'pgoutput')");
            Lsn behindEnd = Lsn.parse(single(behind, source.database, "SELECT pg_current_wal_flush_lsn()::text"));
            // before the slot: WAL of no event
            while (Lsn.parse(source.queryOne("SELECT pg_current_wal_flush_lsn()::text")).value() < behindEnd.value() + (64L << 20)) {
                source.sql("CREATE TABLE IF NOT EXISTS wal_filler (n int)", "INSERT INTO wal_filler SELECT generate_series(1, 500000)",
                        "TRUNCATE wal_filler");
            }
            source.prepare("*");
            try (io.walhook.testing.TcpProxy proxy = io.walhook.testing.TcpProxy.to("127.0.0.1", source.server.port())) {
                java.util.concurrent.atomic.AtomicReference<Throwable> failed = new java.util.concurrent.atomic.AtomicReference<>();
                ReplicationReader reader = startThrough(source, proxy, failed);
                source.sql("INSERT INTO t VALUES (1)");
                await().atMost(WAIT).until(() -> source.received.size() == 1);
                Lsn read = Lsn.parse(source.received.get(0).at("/tx/commit_lsn").asText());
                await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).orElse(Lsn.INVALID).compareTo(read) > 0);

                proxy.retarget(behind.port());
                proxy.dropAll();
                await().atMost(WAIT).until(() -> failed.get() != null);
                assertThat(failed.get()).hasMessageContaining("past the end of the server's WAL");
                assertThat(reader.status().state()).isEqualTo(SourceStatus.State.STOPPED);
                behind.execute(source.database, "INSERT INTO t VALUES (2)");

                ReplicationReader again = source.startReader(); // walhook started again: its checkpoint is the old server's
                assertThat(again.otherHistory()).isTrue();
                assertThat(again.resumesFrom()).as("the slot's own position on the new server").isLessThan(behindEnd.plus(1 << 20));
                await().atMost(WAIT).until(() -> source.received.stream().anyMatch(e -> e.at("/new/id").asInt() == 2));
                // set aside for good: kept, the next start would resume from it again (a save never moves it back)
                assertThat(source.checkpoints.load(source.slot).orElse(read)).isLessThan(read);
            }
        } finally {
            behind.stop();
        }
    }

    /**
     * Every walsender taken when walhook starts (an instance before it still connected, its walsender
     * not yet gone): the start waits for one to be free instead of failing at once, which made
     * walhook exit and its supervisor restart it into the same refusal.
     */
    @Test
    void aStartWhileEveryWalsenderIsTakenWaitsForOneToBeFree() throws Exception {
        EmbeddedPostgres pg = EmbeddedPostgres.builder().major(TestPostgres.defaultMajor())
                .setting("max_wal_senders", "2").start();
        List<java.sql.Connection> taken = new java.util.ArrayList<>();
        try (SourceFixture source = new SourceFixture(pg, "reader_walsenders")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            ReplicationReader first = source.startReader();
            source.sql("INSERT INTO t VALUES (1)");
            await().atMost(WAIT).until(() -> source.received.size() == 1);
            Lsn read = Lsn.parse(source.received.get(0).at("/tx/commit_lsn").asText());
            await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).orElse(Lsn.INVALID).compareTo(read) > 0);
            source.stopReader(first);
            Lsn saved = source.checkpoints.load(source.slot).orElseThrow();

            java.util.Properties replication = new java.util.Properties();
            replication.setProperty("user", pg.user());
            replication.setProperty("password", pg.password());
            org.postgresql.PGProperty.REPLICATION.set(replication, "database");
            org.postgresql.PGProperty.ASSUME_MIN_SERVER_VERSION.set(replication, "10");
            org.postgresql.PGProperty.PREFER_QUERY_MODE.set(replication, "simple");
            for (int i = 0; i < 2; i++) {
                taken.add(java.sql.DriverManager.getConnection(pg.jdbcUrl(source.database), replication));
            }
            assertThatThrownBy(() -> java.sql.DriverManager.getConnection(pg.jdbcUrl(source.database), replication).close())
                    .isInstanceOfSatisfying(java.sql.SQLException.class, e -> assertThat(e.getSQLState()).isEqualTo("53300"));

            java.util.concurrent.CompletableFuture<ReplicationReader> starting = java.util.concurrent.CompletableFuture
                    .supplyAsync(() -> {
                        try {
                            return ReplicationReader.resuming(source.settings(), source.checkpoints);
                        } catch (java.sql.SQLException e) {
                            throw new java.util.concurrent.CompletionException(e);
                        }
                    });
            await().during(Duration.ofSeconds(3)).atMost(Duration.ofSeconds(10)).until(() -> !starting.isDone());
            taken.remove(0).close();
            ReplicationReader again = starting.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertThat(again.resumesFrom()).isEqualTo(saved);
            assertThat(again.otherHistory()).isFalse();
        } finally {
            for (java.sql.Connection c : taken) {
                c.close();
            }
            pg.stop();
        }
    }

    @Test
    void aTimelineHistorySaysWhereEachAncestorEnded() throws Exception {
        String history = "1\t0/3000158\tno recovery target specified\n\n2\t0/5000000\tbefore 2026-12-01 00:00:00+00\n";
        assertThat(ReplicationReader.switchPoint(history, 1)).isEqualTo(Lsn.parse("0/3000158"));
        assertThat(ReplicationReader.switchPoint(history, 2)).isEqualTo(Lsn.parse("0/5000000"));
        assertThat(ReplicationReader.switchPoint(history, 3)).as("not an ancestor").isEqualTo(Lsn.INVALID);
        assertThat(ReplicationReader.switchPoint("# a comment\n1 0/10 reason", 1)).isEqualTo(Lsn.parse("0/10"));
        assertThatThrownBy(() -> ReplicationReader.switchPoint("1\t0/3000158\nx\t0/10\treason\n", 2))
                .hasMessageContaining("\"x\t0/10\treason\"");
        assertThatThrownBy(() -> ReplicationReader.switchPoint("1\tnot-a-position\treason", 1))
                .hasMessageContaining("not-a-position");
        assertThatThrownBy(() -> ReplicationReader.switchPoint("1", 1)).hasMessageContaining("no switch point");
    }

    /**
     * A transaction some of whose events were handed on before the connection broke counts as read:
     * a standby promoted before it received it has another history, as when it was handed on whole
     * (read on there, what was delivered of it belonged to no history the reader then followed).
     */
    @Test
    void aTransactionHandedOnInPartCountsAsReadOfTheHistory() {
        Lsn end = Lsn.of(0x300);
        assertThat(ReplicationReader.reached(end, Lsn.of(0x200), Lsn.INVALID)).isEqualTo(end);
        assertThat(ReplicationReader.reached(end, Lsn.of(0x200), Lsn.of(0x500))).isEqualTo(Lsn.of(0x500));
        assertThat(ReplicationReader.reached(end, Lsn.of(0x400), Lsn.of(0x100))).isEqualTo(Lsn.of(0x400));
        assertThat(ReplicationReader.reached(Lsn.INVALID, Lsn.INVALID, Lsn.of(0x500))).isEqualTo(Lsn.of(0x500));
    }

    /**
     * A standby in recovery is waited for only when it is on an earlier timeline of the system read
     * (replaying again after a crash, it comes back to the later one). One on a later timeline (it
     * followed its upstream onto a new one) never comes back: it was waited for all the same, and
     * the stream stalled for good.
     */
    @Test
    void onlyAStandbyOnAnEarlierTimelineOfTheSystemReadIsWaitedFor() {
        io.walhook.checkpoint.Timeline read = new io.walhook.checkpoint.Timeline("7431", 3);
        assertThat(ReplicationReader.replayingAgain(read, new io.walhook.checkpoint.Timeline("7431", 2))).isTrue();
        assertThat(ReplicationReader.replayingAgain(read, new io.walhook.checkpoint.Timeline("7431", 4)))
                .as("a later timeline").isFalse();
        assertThat(ReplicationReader.replayingAgain(read, new io.walhook.checkpoint.Timeline("7431", 3))).isFalse();
        assertThat(ReplicationReader.replayingAgain(read, new io.walhook.checkpoint.Timeline("9999", 2)))
                .as("another system").isFalse();
        assertThat(ReplicationReader.replayingAgain(io.walhook.checkpoint.Timeline.UNKNOWN,
                new io.walhook.checkpoint.Timeline("7431", 2))).as("nothing recorded").isFalse();
    }

    @Test
    void positionsAreOfTheServersHistoryWithinWhatItSharesOrWhatItsOwnSlotAcknowledged() {
        io.walhook.checkpoint.Timeline one = new io.walhook.checkpoint.Timeline("7", 1);
        io.walhook.checkpoint.Timeline two = new io.walhook.checkpoint.Timeline("7", 2);
        io.walhook.checkpoint.Timeline upgraded = new io.walhook.checkpoint.Timeline("8", 1);
        Lsn switched = Lsn.parse("0/5000000");
        Lsn read = Lsn.parse("0/5000100");
        assertThat(ReplicationReader.ofItsHistory(read, null, one, one, Lsn.INVALID)).as("the same timeline").isTrue();
        assertThat(ReplicationReader.ofItsHistory(Lsn.parse("0/4000000"), switched, one, two, Lsn.INVALID)).as("before the switch").isTrue();
        assertThat(ReplicationReader.ofItsHistory(read, switched, one, two, Lsn.parse("0/4000000")))
                .as("a standby promoted before it received what was read").isFalse();
        assertThat(ReplicationReader.ofItsHistory(read, switched, one, two, Lsn.parse("0/5000080")))
                .as("its own slot acknowledged past the switch: read from it").isTrue();
        assertThat(ReplicationReader.ofItsHistory(read, Lsn.INVALID, two, one, Lsn.parse("0/6000000")))
                .as("an earlier timeline").isFalse();
        assertThat(ReplicationReader.ofItsHistory(read, Lsn.INVALID, one, upgraded, read)).as("a slot carried over").isTrue();
        assertThat(ReplicationReader.ofItsHistory(read, Lsn.INVALID, one, upgraded, switched)).as("another cluster").isFalse();
        assertThat(ReplicationReader.ofItsHistory(read, Lsn.INVALID, one, upgraded, Lsn.INVALID)).isFalse();
    }

    /**
     * A standby that had not received the primary's last WAL, promoted while the reader was still
     * reading the primary: the new server's history leaves the old one at the promotion's switch
     * point, below what the reader read and acknowledged, and the new server has written past those
     * positions by the time the reader reconnects, so comparing positions alone does not tell it.
     * Resumed from them, the new server's first transaction (committed between the switch point
     * and those positions) was skipped: lost. The timeline tells: the reader stops, and started
     * again it resumes from the switch point.
     */
    @Test
    void aStandbyPromotedBehindWhatWasReadIsReadFromWhereItsHistoryLeftTheOldOne() throws Exception {
        io.walhook.testing.EmbeddedPostgres primary = io.walhook.testing.EmbeddedPostgres.builder()
                .major(TestPostgres.defaultMajor()).start();
        io.walhook.testing.EmbeddedPostgres standby = null;
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_timeline")) {
            primary.execute(primary.defaultDatabase(), "CREATE DATABASE " + source.database);
            primary.execute(source.database, "CREATE TABLE t (id int PRIMARY KEY)", "CREATE TABLE filler (n int)",
                    "CREATE PUBLICATION walhook FOR TABLE t",
                    "SELECT pg_create_logical_replication_slot('" + source.slot + "', 'pgoutput')");
            standby = primary.standbyWithSlots();
            io.walhook.testing.EmbeddedPostgres promoted = standby;
            try (io.walhook.testing.TcpProxy proxy = io.walhook.testing.TcpProxy.to("127.0.0.1", primary.port())) {
                java.util.concurrent.atomic.AtomicReference<Throwable> failed = new java.util.concurrent.atomic.AtomicReference<>();
                ReplicationReader reader = startThrough(source, proxy, failed);
                primary.execute(source.database, "INSERT INTO t VALUES (1)");
                await().atMost(WAIT).until(() -> source.received.size() == 1);
                Lsn first = Lsn.parse(single(primary, source.database, "SELECT pg_current_wal_flush_lsn()::text"));
                await().atMost(WAIT).until(() -> Lsn.parse(single(promoted, "postgres",
                        "SELECT pg_last_wal_replay_lsn()::text")).compareTo(first) >= 0);

                standby.stopStreaming();
                await().atMost(WAIT).until(() -> "0".equals(single(primary, "postgres", "SELECT count(*) FROM pg_stat_replication"
                        + " WHERE application_name <> 'walhook'")));
                // WAL the standby never receives, then a change the reader reads and acknowledges
                primary.execute(source.database, "INSERT INTO filler SELECT generate_series(1, 5000)", "INSERT INTO t VALUES (2)");
                await().atMost(WAIT).until(() -> source.received.size() == 2);
                Lsn read = Lsn.parse(source.received.get(1).at("/tx/commit_lsn").asText());
                await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).orElse(Lsn.INVALID).compareTo(read) > 0);
                assertThat(source.checkpoints.loadSaved(source.slot).orElseThrow().timeline().id()).as("kept with it").isEqualTo(1);

                primary.stop();
                standby.promote();
                // the new server's first change commits below what the reader read; then it writes past that
                promoted.execute(source.database, "INSERT INTO t VALUES (3)");
                Lsn three = Lsn.parse(single(promoted, source.database, "SELECT pg_current_wal_flush_lsn()::text"));
                assertThat(three).as("committed below what the reader read").isLessThan(read);
                while (Lsn.parse(single(promoted, source.database, "SELECT pg_current_wal_flush_lsn()::text")).compareTo(read) <= 0) {
                    promoted.execute(source.database, "INSERT INTO filler SELECT generate_series(1, 5000)");
                }
                proxy.retarget(promoted.port());
                proxy.dropAll();
                await().atMost(WAIT).until(() -> failed.get() != null);
                assertThat(failed.get()).hasMessageContaining("timeline");
                assertThat(reader.status().state()).isEqualTo(SourceStatus.State.STOPPED);

                // what the old history left in the state: a queued change (its destination failing) and a dropped dead letter
                source.sql("INSERT INTO walhook.parked_event (subscription, subscription_id, event_id, commit_lsn, content_type,"
                        + " headers, body) VALUES ('s', 's', 'old', '" + read + "', 'application/json', '{}', '\\x7b7d'),"
                        + " ('s', 's', 'shared', '0/10', 'application/json', '{}', '\\x7b7d')",
                        "INSERT INTO walhook.dropped_event VALUES ('s', 'dropped', '" + read + "')");
                long queued = Long.parseLong(source.queryOne("SELECT max(id) FROM walhook.parked_event"));
                ReplicationReader again = source.startReader(); // walhook started again: its checkpoint is past the switch
                assertThat(again.otherHistory()).isTrue();
                // kept for the starts after this one, with the checkpoint replaced in one transaction
                assertThat(again.earlierHistoryUpTo()).isEqualTo(queued);
                assertThat(source.checkpoints.loadSaved(source.slot).orElseThrow().earlierHistoryUpTo()).isEqualTo(queued);
                assertThat(source.queryOne("SELECT count(*) FROM walhook.dropped_event")).isEqualTo("0");
                // the new history's changes after the switch may have the ids of the old one's queued there: those
                // take their row id (appended with the same id, a new change was taken for a resend and not queued)
                assertThat(source.queryOne("SELECT (event_id = 'old~' || id)::text FROM walhook.parked_event"
                        + " WHERE commit_lsn = '" + read + "'")).isEqualTo("true");
                assertThat(source.queryOne("SELECT event_id FROM walhook.parked_event WHERE commit_lsn = '0/10'"))
                        .as("committed before the switch: the new server sends it again, if at all, with its id").isEqualTo("shared");
                assertThat(again.resumesFrom()).as("where the new history left the old").isLessThan(three);
                await().atMost(WAIT).until(() -> source.received.stream().anyMatch(e -> e.at("/new/id").asInt() == 3));
                assertThat(source.received).as("the change of the old history before the switch is not read again")
                        .filteredOn(e -> e.at("/new/id").asInt() == 1).hasSize(1);
                Lsn resumed = again.resumesFrom();
                await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).orElseThrow().compareTo(resumed) > 0);
                source.stopReader(again);
                ReplicationReader third = source.startReader(); // an ordinary restart after that
                assertThat(third.otherHistory()).isFalse();
                assertThat(third.earlierHistoryUpTo()).as("the old history's queued rows stay marked").isEqualTo(queued);
            }
        } finally {
            if (standby != null) {
                standby.stop();
            }
            primary.stop();
        }
    }

    /**
     * Decoding on a standby (PostgreSQL 16): the standby promoted while the reader streams from it.
     * The stream goes on past the switch point, on the new timeline, with the timeline read at the
     * connection recorded; a reconnect then found positions past where the server's history left
     * that timeline and stopped walhook (and started again it read everything since the promotion
     * again), though they were all read from this very server. Positions its own slot acknowledged
     * past the switch point are of its history.
     */
    @Test
    void aStandbySourcePromotedWhileStreamingIsReadOnAfterAReconnect() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(TestPostgres.defaultMajor() >= 16, "decoding on a standby needs PostgreSQL 16");
        io.walhook.testing.EmbeddedPostgres primary = io.walhook.testing.EmbeddedPostgres.builder()
                .major(TestPostgres.defaultMajor()).start();
        io.walhook.testing.EmbeddedPostgres standby = null;
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_promoted_source")) {
            primary.execute(primary.defaultDatabase(), "CREATE DATABASE " + source.database);
            primary.execute(source.database, "CREATE TABLE t (id int PRIMARY KEY)", "CREATE PUBLICATION walhook FOR TABLE t");
            standby = primary.standbyWithSlots();
            io.walhook.testing.EmbeddedPostgres replica = standby;
            // a slot on the standby waits for the primary's next snapshot of running transactions
            java.util.concurrent.CompletableFuture<Void> created = java.util.concurrent.CompletableFuture.runAsync(() -> {
                try {
                    replica.execute(source.database, "SELECT pg_create_logical_replication_slot('" + source.slot + "', 'pgoutput')");
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            await().atMost(WAIT).until(() -> {
                primary.execute(source.database, "SELECT pg_log_standby_snapshot()");
                return created.isDone();
            });
            created.join();
            try (io.walhook.testing.TcpProxy proxy = io.walhook.testing.TcpProxy.to("127.0.0.1", standby.port())) {
                java.util.concurrent.atomic.AtomicReference<Throwable> failed = new java.util.concurrent.atomic.AtomicReference<>();
                ReplicationReader reader = startThrough(source, proxy, failed);
                primary.execute(source.database, "INSERT INTO t VALUES (1)");
                await().atMost(WAIT).until(() -> source.received.size() == 1);

                primary.stop();
                standby.promote();
                replica.execute(source.database, "INSERT INTO t VALUES (2)");
                await().atMost(WAIT).until(() -> source.received.size() == 2);
                Lsn two = Lsn.parse(source.received.get(1).at("/tx/commit_lsn").asText());
                await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).orElse(Lsn.INVALID).compareTo(two) > 0);

                proxy.dropAll();
                replica.execute(source.database, "INSERT INTO t VALUES (3)");
                await().atMost(WAIT).until(() -> source.received.size() == 3 || failed.get() != null);
                assertThat(failed.get()).as("walhook goes on").isNull();
                assertThat(source.received).extracting(e -> e.at("/new/id").asInt()).containsExactly(1, 2, 3);
                // saved with the timeline it is now read on
                await().atMost(WAIT).until(() -> source.checkpoints.loadSaved(source.slot).orElseThrow().timeline().id() == 2);
            }
        } finally {
            if (standby != null) {
                standby.stop();
            }
            primary.stop();
        }
    }

    /** Starts the fixture's reader through {@code proxy}; an end of its thread (walhook exits) is kept in {@code failed}. */
    private static ReplicationReader startThrough(SourceFixture source, io.walhook.testing.TcpProxy proxy,
            java.util.concurrent.atomic.AtomicReference<Throwable> failed) throws Exception {
        source.replicationUrl = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/" + source.database;
        ReplicationReader reader = source.startReader();
        reader.onFailure((thread, e) -> failed.set(e));
        return reader;
    }

    private static String single(io.walhook.testing.PostgresServer server, String database, String query) throws Exception {
        try (java.sql.Connection c = server.connect(database); java.sql.Statement s = c.createStatement();
                java.sql.ResultSet rs = s.executeQuery(query)) {
            rs.next();
            return rs.getString(1);
        }
    }

    @Test
    void idleSourceIsNotWrittenToByCheckpoints() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_quiet")) {
            source.sql("CREATE TABLE t (id int PRIMARY KEY)");
            source.prepare("*");
            ReplicationReader reader = source.startReader();
            source.sql("INSERT INTO t VALUES (1)");
            await().atMost(WAIT).until(() -> source.received.size() == 1);
            Lsn commit = Lsn.parse(source.received.get(0).at("/tx/commit_lsn").asText());
            await().atMost(WAIT).until(() -> source.checkpoints.load(source.slot).orElse(Lsn.INVALID).compareTo(commit) > 0);
            String saved = source.queryOne("SELECT updated_at::text FROM walhook.checkpoint");
            // several acknowledgement rounds pass; the checkpoint row is not rewritten for nothing
            await().during(Duration.ofSeconds(3)).atMost(WAIT).untilAsserted(() -> {
                assertThat(source.queryOne("SELECT updated_at::text || ' ' || end_lsn FROM walhook.checkpoint"))
                        .startsWith(saved);
                assertThat(reader.status().state()).isEqualTo(SourceStatus.State.STREAMING);
            });
            source.sql("INSERT INTO t VALUES (2)");
            await().atMost(WAIT).until(() -> !source.queryOne("SELECT updated_at::text FROM walhook.checkpoint").equals(saved));
        }
    }

    @Test
    void anIdleReaderBlocksOnTheSocketAndStillAnswersTheServersKeepalives() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "reader_idle")) {
            // the reader's own status updates come every 10 s: only answering keepalives keeps it connected
            source.sql("CREATE TABLE t (id int PRIMARY KEY)",
                    "ALTER DATABASE " + source.database + " SET wal_sender_timeout = '1s'");
            source.prepare("*");
            ReplicationReader reader = source.startReader();
            source.sql("INSERT INTO t VALUES (1)");
            await().atMost(WAIT).until(() -> source.received.size() == 1);
            String walsender = source.queryOne("SELECT active_pid FROM pg_replication_slots WHERE slot_name = '"
                    + source.slot + "'");
            long wakeUps = reader.idleWakeUps();
            long since = System.nanoTime();
            // five server timeouts idle: the same walsender throughout
            await().during(Duration.ofSeconds(5)).atMost(WAIT).until(() -> walsender.equals(source.queryOne(
                    "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '" + source.slot + "'"))
                    && reader.status().state() == SourceStatus.State.STREAMING);
            double perSecond = (reader.idleWakeUps() - wakeUps) / ((System.nanoTime() - since) / 1e9);
            // blocked on the socket: woken by keepalives and the 100 ms wait, not a 5 ms poll (200 a second)
            assertThat(perSecond).as("idle wake-ups per second").isLessThan(30);
            source.sql("INSERT INTO t VALUES (2)");
            await().atMost(WAIT).until(() -> source.received.size() == 2);
            assertThat(reader.status().lastError()).isNull();
        }
    }

    @Test
    void itsSettingsNeverShowThePassword() {
        ReplicationReader.Settings settings = new ReplicationReader.Settings("jdbc:postgresql://db:5432/orders", "app",
                "Zq9-pa55", "slot", "walhook", "walhook", 16, Duration.ofSeconds(10), Duration.ofSeconds(1),
                Duration.ofSeconds(30), 1000, 1 << 20, java.nio.file.Path.of("/tmp"), 1 << 20);
        assertThat(settings.toString()).contains("db:5432").doesNotContain("Zq9-pa55");
    }
}
