package io.walhook.source;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.postgresql.ds.PGSimpleDataSource;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.change.EventJsonWriter;
import io.walhook.checkpoint.CheckpointStore;
import io.walhook.pgoutput.Lsn;
import io.walhook.testing.PostgresServer;
import io.walhook.checkpoint.PendingEvent;

/**
 * A source database prepared as walhook prepares it (state schema, publication, slot), and a
 * test consumer in place of the delivery engine: it records every event as JSON and, unless
 * told to hold, completes it at once.
 */
public final class SourceFixture implements AutoCloseable {

    /** Keeps numbers as written (12.50 stays 12.50) so tests see every digit walhook sent. */
    public static final ObjectMapper JSON = new ObjectMapper()
            .enable(com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .setNodeFactory(com.fasterxml.jackson.databind.node.JsonNodeFactory.withExactBigDecimals(true));

    public final PostgresServer server;
    public final String database;
    public final PGSimpleDataSource dataSource;
    public final CheckpointStore checkpoints;
    /** Slots are per cluster: each fixture's is named after its database. */
    public final String slot;
    public final List<JsonNode> received = new CopyOnWriteArrayList<>();
    private final List<ReplicationReader> readers = new ArrayList<>();
    private volatile boolean hold;
    /** Events the consumer records but does not complete, besides everything while {@link #hold} is on. */
    volatile java.util.function.Predicate<JsonNode> holdWhen = event -> false;
    /** While true the consumer takes nothing: the reader's hand-off fills up. */
    volatile boolean paused;
    int handoffCapacity = 1000;
    long handoffBytes = 32L << 20;
    private Thread consumer;
    long streamMemoryBytes = 64L << 20;
    Duration reconnectMaxBackoff = Duration.ofSeconds(2);
    Path spillDirectory = Path.of(System.getProperty("java.io.tmpdir"));
    /** Where the reader connects, when not to the server itself (a proxy in front of it). */
    String replicationUrl;
    Duration statusInterval = Duration.ofSeconds(10);
    Duration checkpointInterval = Duration.ofMillis(100);

    public SourceFixture(PostgresServer server, String prefix) throws SQLException {
        this.server = server;
        this.database = server.createDatabase(prefix);
        this.slot = database;
        this.dataSource = new PGSimpleDataSource();
        dataSource.setUrl(server.jdbcUrl(database));
        dataSource.setUser(server.user());
        dataSource.setPassword(server.password());
        io.walhook.config.SchemaMigrations.migrate(dataSource, "walhook"); // walhook's own schema, as it migrates it
        this.checkpoints = new CheckpointStore(dataSource, "walhook");
    }

    /**
     * Another data source to this database whose sessions give up on a silent server after
     * {@code socketSeconds} and whose statements the server cancels after {@code statementMillis}:
     * the pool's limits (io.walhook.config.SessionTimeout), made short.
     */
    public PGSimpleDataSource limited(int socketSeconds, int statementMillis) {
        PGSimpleDataSource limited = new PGSimpleDataSource();
        limited.setUrl(dataSource.getUrl());
        limited.setUser(dataSource.getUser());
        limited.setPassword(dataSource.getPassword());
        limited.setSocketTimeout(socketSeconds);
        limited.setOptions("-c statement_timeout=" + statementMillis);
        return limited;
    }

    public void sql(String... statements) throws SQLException {
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement()) {
            for (String statement : statements) {
                s.execute(statement);
            }
        }
    }

    public String queryOne(String sql) throws SQLException {
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getString(1);
        }
    }

    /** Creates publication and slot as walhook does on start. */
    public void prepare(String publicationTables) throws SQLException {
        SourceDatabase source = new SourceDatabase(dataSource);
        source.checkPrerequisites();
        source.ensurePublication("walhook", publicationTables);
        source.ensureSlot(slot, checkpoints.load(slot));
    }

    ReplicationReader.Settings settings() throws SQLException {
        return new ReplicationReader.Settings(replicationUrl != null ? replicationUrl : server.jdbcUrl(database), server.user(), server.password(), slot,
                "walhook", "walhook", new SourceDatabase(dataSource).serverMajor(), statusInterval,
                checkpointInterval, reconnectMaxBackoff, handoffCapacity, handoffBytes, spillDirectory, streamMemoryBytes);
    }

    /** Starts a reader resuming from the checkpoint, with {@code consumer} taking from its queue. */
    public ReplicationReader startReader(java.util.function.Function<ReplicationReader, Runnable> consumerOf)
            throws SQLException {
        ReplicationReader reader = ReplicationReader.resuming(settings(), checkpoints);
        readers.add(reader);
        reader.start();
        consumer = new Thread(consumerOf.apply(reader), "test-consumer");
        consumer.setDaemon(true);
        consumer.start();
        return reader;
    }

    /** Starts a reader resuming from the checkpoint, with the recording test consumer on its queue. */
    ReplicationReader startReader() throws SQLException {
        ReplicationReader reader = ReplicationReader.resuming(settings(), checkpoints);
        readers.add(reader);
        reader.start();
        EventJsonWriter writer = new EventJsonWriter();
        consumer = new Thread(() -> {
            try {
                while (!Thread.currentThread().isInterrupted()) {
                    if (paused) {
                        Thread.sleep(50);
                        continue;
                    }
                    PendingEvent pending = reader.events().poll(100, TimeUnit.MILLISECONDS);
                    if (pending == null) {
                        continue;
                    }
                    JsonNode event = JSON.readTree(new String(writer.toJson(pending.event()), StandardCharsets.UTF_8));
                    received.add(event);
                    if (!hold && !holdWhen.test(event)) {
                        reader.tracker().complete(pending.ticket(), 1);
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, "test-consumer");
        consumer.setDaemon(true);
        consumer.start();
        return reader;
    }

    /** Events are recorded but never completed: nothing can be acknowledged. */
    void hold(boolean hold) {
        this.hold = hold;
    }

    void stopReader(ReplicationReader reader) throws InterruptedException {
        reader.stop(Duration.ofSeconds(20));
        consumer.interrupt();
        consumer.join(10_000);
    }

    Lsn confirmedFlush() throws SQLException {
        String lsn = queryOne("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
        return Lsn.parse(lsn);
    }

    @Override
    public void close() throws Exception {
        for (ReplicationReader reader : readers) {
            reader.stop(Duration.ofSeconds(20));
        }
        if (consumer != null) {
            consumer.interrupt();
        }
        try {
            sql("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '" + slot
                    + "' AND NOT active");
        } catch (SQLException ignored) {
            // the cluster goes away at the end of the run anyway
        }
    }
}
