package io.walhook.torture;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeSet;

import io.walhook.testing.PostgresServer;

/**
 * The writer: one connection, one transaction at a time, each chosen from the seed: hot-row
 * inserts, updates and deletes, TOASTed values, rollbacks, rolled-back savepoints, transactions
 * large enough to be streamed (committed or rolled back), two-phase commits and rollbacks,
 * truncates, transactional and non-transactional logical messages, and ALTER TABLE between and
 * inside transactions. It keeps a model of the tables (which rows exist) so every change is valid,
 * and records every change and outcome in the {@link Ledger}.
 *
 * <p>One writer makes commit order exact: it is the order in which this class saw its commits
 * succeed. When the connection breaks (a PostgreSQL restart), it reconnects and asks the server
 * what became of the transaction it was committing ({@code txid_status}) before it goes on.
 */
final class Workload {

    static final int HOT_ROWS = 40;
    static final int TOAST_ROWS = 8;
    static final int MAX_ALTERS = 5;

    private final PostgresServer pg;
    private final String database;
    private final SplittableRandom random;
    private final Ledger ledger;
    private Connection connection;
    private long w;
    private long prepared;
    private int alters;
    /** Whether hot's replica identity is FULL, as committed; and whether an ALTER ever changed it. */
    private boolean hotFull;
    private boolean hotRekeyed;
    private long truncId;
    private long bulkId;
    /** Rows that exist, as committed. */
    private final Set<Integer> hot = new TreeSet<>();
    private final Set<Integer> toast = new TreeSet<>();
    /** Rows a prepared, not yet finished transaction holds locks on: not touched until it ends. */
    private final Set<String> locked = new HashSet<>();
    private final List<Pending> pendingPrepared = new ArrayList<>();
    private boolean dirty;
    private int backendPid;
    private final java.util.concurrent.ExecutorService killer = java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "torture-terminator");
        t.setDaemon(true);
        return t;
    });
    int transactions;
    int failures;
    int terminations;

    /** A prepared transaction and the rows it holds locks on. */
    private record Pending(Ledger.Tx tx, Set<String> keys) {
    }

    Workload(PostgresServer pg, String database, SplittableRandom random, Ledger ledger) {
        this.pg = pg;
        this.database = database;
        this.random = random;
        this.ledger = ledger;
    }

    static void createSchema(PostgresServer pg, String database) throws SQLException {
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE hot (id int PRIMARY KEY, w bigint NOT NULL, note text)");
            s.execute("CREATE TABLE toast (id int PRIMARY KEY, w bigint NOT NULL, big text)");
            s.execute("ALTER TABLE toast ALTER COLUMN big SET STORAGE EXTERNAL");
            s.execute("CREATE TABLE trunc (id bigint PRIMARY KEY, w bigint NOT NULL)");
            s.execute("CREATE TABLE bulk (id bigint PRIMARY KEY, w bigint NOT NULL, pad text)");
        }
    }

    /** One transaction (or the end of a prepared one), chosen from the seed. */
    void step() {
        int pick = random.nextInt(100);
        try {
            ensureConnected();
            if (dirty) {
                reconcile();
            }
            if (!pendingPrepared.isEmpty() && random.nextInt(100) < 30) {
                finishPrepared(pendingPrepared.get(0), random.nextInt(100) < 70);
            } else if (pick < 45) {
                rowTransaction(false, false);
            } else if (pick < 55) {
                toastTransaction();
            } else if (pick < 63) {
                rowTransaction(true, false);
            } else if (pick < 68) {
                rowTransaction(false, pendingPrepared.size() < 3);
            } else if (pick < 71) {
                bulkTransaction(random.nextInt(100) < 30);
            } else if (pick < 74) {
                truncTransaction(true);
            } else if (pick < 82) {
                truncTransaction(false);
            } else if (pick < 83 && alters < MAX_ALTERS && pendingPrepared.isEmpty()) {
                // (not while a prepared transaction holds a lock on the table: the ALTER would wait for it)
                alter();
            } else {
                singleUpdate();
            }
            transactions++;
        } catch (SQLException e) {
            failures++;
            dirty = true;
            closeQuietly();
        }
    }

    /** The end of the run: every prepared transaction finished, committed or rolled back as the seed says. */
    void finish() {
        Instant deadline = Instant.now().plus(Duration.ofMinutes(2));
        while (!pendingPrepared.isEmpty() && Instant.now().isBefore(deadline)) {
            try {
                ensureConnected();
                if (dirty) {
                    reconcile();
                }
                if (!pendingPrepared.isEmpty()) {
                    finishPrepared(pendingPrepared.get(0), random.nextInt(100) < 70);
                }
            } catch (SQLException e) {
                dirty = true;
                closeQuietly();
                pause(100);
            }
        }
        closeQuietly();
        killer.shutdownNow();
    }

    private void rowTransaction(boolean rollBack, boolean twoPhase) throws SQLException {
        Set<Integer> hotAfter = new TreeSet<>(hot);
        Set<String> keys = new HashSet<>();
        Ledger.Tx tx = begin(twoPhase ? "torture_" + (++prepared) : null);
        int changes = 1 + random.nextInt(4);
        int index = 0;
        try {
            for (int i = 0; i < changes; i++) {
                index = rowChange(tx, hotAfter, keys, index, false);
            }
            if (random.nextInt(100) < 15) {
                // a savepoint rolled back: what it did is never delivered
                exec("SAVEPOINT s");
                Set<Integer> scratch = new TreeSet<>(hotAfter);
                Set<String> scratchKeys = new HashSet<>(keys);
                int undone = index;
                for (int i = 0; i < 1 + random.nextInt(3); i++) {
                    undone = rowChange(tx, scratch, scratchKeys, undone, true);
                }
                exec("ROLLBACK TO SAVEPOINT s");
            }
            if (random.nextInt(100) < 12) {
                String content = "m" + (++w);
                exec("SELECT pg_logical_emit_message(true, 'torture', '" + content + "')");
                ledger.add(tx, new Ledger.Change(content, null, "message", ++index, "message", null), false);
            }
            if (random.nextInt(100) < 6) {
                nonTransactionalMessage();
            }
        } catch (SQLException e) {
            abort(tx);
            throw e;
        }
        if (rollBack) {
            connection.rollback();
            ledger.aborted(tx);
        } else if (twoPhase) {
            prepare(tx, keys);
        } else if (commit(tx)) {
            hot.clear();
            hot.addAll(hotAfter);
        }
    }

    /** An insert, update or delete of one hot row not yet touched in this transaction; returns the change's index. */
    private int rowChange(Ledger.Tx tx, Set<Integer> rows, Set<String> keys, int index, boolean undone) throws SQLException {
        int id = 1 + random.nextInt(HOT_ROWS);
        String key = "hot:" + id;
        if (keys.contains(key) || locked.contains(key)) {
            return index;
        }
        keys.add(key);
        if (!rows.contains(id)) {
            long value = ++w;
            update("INSERT INTO hot (id, w, note) VALUES (" + id + ", " + value + ", 'n" + value + "')");
            rows.add(id);
            ledger.add(tx, new Ledger.Change("w" + value, "hot", key, ++index, "insert", null), undone);
        } else if (random.nextInt(100) < 15) {
            update("DELETE FROM hot WHERE id = " + id);
            rows.remove(id);
            ledger.add(tx, new Ledger.Change("D:hot:" + id + ":" + (tx.xid % 4294967296L), "hot", key, ++index, "delete", null),
                    undone);
        } else {
            long value = ++w;
            update("UPDATE hot SET w = " + value + ", note = 'n" + value + "' WHERE id = " + id);
            ledger.add(tx, new Ledger.Change("w" + value, "hot", key, ++index, "update", null), undone);
        }
        return index;
    }

    private void singleUpdate() throws SQLException {
        hotTransaction(false);
    }

    private void toastTransaction() throws SQLException {
        int id = 1 + random.nextInt(TOAST_ROWS);
        String key = "toast:" + id;
        if (locked.contains(key)) {
            return;
        }
        Ledger.Tx tx = begin(null);
        boolean exists = toast.contains(id);
        long value = ++w;
        try {
            if (!exists || random.nextBoolean()) {
                String big = text(3000 + random.nextInt(9000));
                try (PreparedStatement s = connection.prepareStatement(exists
                        ? "UPDATE toast SET w = ?, big = ? WHERE id = ?" : "INSERT INTO toast (w, big, id) VALUES (?, ?, ?)")) {
                    s.setLong(1, value);
                    s.setString(2, big);
                    s.setInt(3, id);
                    expectOne(s.executeUpdate());
                }
                ledger.add(tx, new Ledger.Change("w" + value, "toast", key, 1, exists ? "update" : "insert", big), false);
            } else {
                // the TOASTed value is unchanged: the server sends it as "unchanged", never as a stale copy
                update("UPDATE toast SET w = " + value + " WHERE id = " + id);
                ledger.add(tx, new Ledger.Change("w" + value, "toast", key, 1, "update", Ledger.UNCHANGED), false);
            }
        } catch (SQLException e) {
            abort(tx);
            throw e;
        }
        if (commit(tx)) {
            toast.add(id);
        }
    }

    /** More rows than {@code logical_decoding_work_mem} holds, so the server streams the transaction while it runs. */
    private void bulkTransaction(boolean rollBack) throws SQLException {
        Ledger.Tx tx = begin(null);
        int rows = 800 + random.nextInt(900);
        long first = bulkId + 1;
        long base = w + 1;
        try {
            exec("INSERT INTO bulk (id, w, pad) SELECT g, " + (base - first) + " + g, repeat('p', 120)"
                    + " FROM generate_series(" + first + ", " + (first + rows - 1) + ") g");
        } catch (SQLException e) {
            abort(tx);
            throw e;
        }
        for (int i = 0; i < rows; i++) {
            ledger.add(tx, new Ledger.Change("w" + (base + i), "bulk", "bulk:" + (first + i), i + 1, "insert", null), false);
        }
        w += rows;
        bulkId += rows;
        if (rollBack) {
            connection.rollback();
            ledger.aborted(tx);
        } else {
            commit(tx);
        }
    }

    /** Inserts into {@code trunc}, or a TRUNCATE of it (then maybe inserts in the same transaction). */
    private void truncTransaction(boolean truncate) throws SQLException {
        Ledger.Tx tx = begin(null);
        int index = 0;
        try {
            if (truncate) {
                exec("TRUNCATE trunc");
                ledger.add(tx, new Ledger.Change("T:trunc:" + (tx.xid % 4294967296L), "trunc", null, ++index, "truncate", null),
                        false);
            }
            int inserts = truncate ? random.nextInt(3) : 1 + random.nextInt(3);
            for (int i = 0; i < inserts; i++) {
                long id = ++truncId;
                long value = ++w;
                update("INSERT INTO trunc (id, w) VALUES (" + id + ", " + value + ")");
                ledger.add(tx, new Ledger.Change("w" + value, "trunc", "trunc:" + id, ++index, "insert", null), false);
            }
        } catch (SQLException e) {
            abort(tx);
            throw e;
        }
        commit(tx);
    }

    /** ALTER TABLE mid-stream: alone, or followed by changes in its transaction. */
    private void alter() throws SQLException {
        alters++;
        hotTransaction(true);
    }

    /** One hot-row change in its own transaction, after an ALTER TABLE when {@code alter}. */
    private void hotTransaction(boolean alter) throws SQLException {
        Set<Integer> hotAfter = new TreeSet<>(hot);
        boolean fullAfter = hotFull;
        Ledger.Tx tx = begin(null);
        try {
            if (alter && alters % 2 == 0) {
                // every other ALTER changes what identifies hot's rows, to FULL and back: their changes from
                // before and after it are keyed apart, and must still arrive in order
                fullAfter = !hotFull;
                hotRekeyed = true;
                exec("ALTER TABLE hot REPLICA IDENTITY " + (fullAfter ? "FULL" : "DEFAULT"));
            } else if (alter) {
                exec("ALTER TABLE hot ADD COLUMN c" + alters + " int DEFAULT " + alters);
            }
            if (!alter || random.nextBoolean()) {
                rowChange(tx, hotAfter, new HashSet<>(), 0, false);
            }
        } catch (SQLException e) {
            abort(tx);
            throw e;
        }
        if (commit(tx)) {
            hot.clear();
            hot.addAll(hotAfter);
            hotFull = fullAfter;
        }
    }

    /** Whether an ALTER TABLE changed hot's replica identity (committed or not): a backfill of it may fail for it. */
    boolean hotRekeyed() {
        return hotRekeyed;
    }

    private void nonTransactionalMessage() throws SQLException {
        String content = "n" + (++w);
        Ledger.Tx message = ledger.begin(0, null, false);
        ledger.add(message, new Ledger.Change(content, null, "message", 0, "message", null), false);
        long lsn;
        // A non-transactional message is in the WAL buffers when the call returns, not yet on disk: in a
        // transaction that then rolls back, nothing flushes it, and a crash right after (pg_ctl stop -m immediate)
        // loses it before any walsender could send it. Flushed (PostgreSQL 17's flush argument), it is required;
        // before 17 it is written or not.
        boolean flushed = connection.getMetaData().getDatabaseMajorVersion() >= 17;
        // its own LSN, from the same statement: reading it apart would end the transaction it is in
        try (Statement s = connection.createStatement(); ResultSet rs = s.executeQuery(
                "SELECT (pg_logical_emit_message(false, 'torture', '" + content + "'" + (flushed ? ", true" : "")
                        + ") - '0/0')::bigint")) {
            rs.next();
            lsn = rs.getLong(1);
        } catch (SQLException e) {
            ledger.unknown(message); // written or not: neither required nor forbidden
            throw e;
        }
        if (flushed) {
            ledger.committed(message, lsn);
        } else {
            ledger.unknown(message);
        }
    }

    private Ledger.Tx begin(String gid) throws SQLException {
        connection.setAutoCommit(false);
        long xid;
        try (Statement s = connection.createStatement(); ResultSet rs = s.executeQuery("SELECT txid_current()")) {
            rs.next();
            xid = rs.getLong(1);
        }
        return ledger.begin(xid, gid, true);
    }

    /** Commits; true when it did. A commit whose answer was lost is resolved from the server before this returns false. */
    private boolean commit(Ledger.Tx tx) throws SQLException {
        ledger.committing(tx);
        try {
            maybeTerminateAround();
            connection.commit();
        } catch (SQLException e) {
            ledger.unknown(tx);
            closeQuietly();
            resolveUnknown(tx);
            if (tx.outcome == Ledger.Outcome.COMMITTED) {
                return true;
            }
            throw e;
        }
        ledger.committed(tx, -1);
        ledger.lsnAfter(tx, insertLsn());
        return true;
    }

    /**
     * Now and then (from the seed) the writer's own session is terminated from another one a moment
     * before its COMMIT, so the commit's answer is lost, or the commit is, or neither: the ledger
     * then asks the server what happened. The moment is the machine's.
     */
    private void maybeTerminateAround() {
        if (random.nextInt(100) >= 2 || backendPid == 0) {
            return;
        }
        int pid = backendPid;
        long delayMicros = random.nextInt(3000);
        killer.submit(() -> {
            java.util.concurrent.locks.LockSupport.parkNanos(delayMicros * 1000);
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                s.execute("SELECT pg_terminate_backend(" + pid + ")");
            } catch (SQLException | RuntimeException e) {
                // the server restarts: nothing to terminate
            }
        });
        terminations++;
    }

    private void abort(Ledger.Tx tx) {
        ledger.aborted(tx); // the statement failed before COMMIT: the server rolls it back
        closeQuietly();
    }

    private void prepare(Ledger.Tx tx, Set<String> keys) throws SQLException {
        try {
            exec("PREPARE TRANSACTION '" + tx.gid + "'");
            connection.setAutoCommit(true);
        } catch (SQLException e) {
            closeQuietly();
            ensureConnected();
            if (!isPrepared(tx.gid)) {
                ledger.aborted(tx);
                throw e;
            }
        }
        pendingPrepared.add(new Pending(tx, keys));
        locked.addAll(keys);
    }

    private void finishPrepared(Pending pending, boolean commit) throws SQLException {
        Ledger.Tx tx = pending.tx();
        connection.setAutoCommit(true);
        if (commit) {
            ledger.committing(tx);
        }
        try {
            exec((commit ? "COMMIT PREPARED '" : "ROLLBACK PREPARED '") + tx.gid + "'");
        } catch (SQLException e) {
            closeQuietly();
            ensureConnected();
            if (isPrepared(tx.gid)) {
                throw e; // still prepared: finished on a later step
            }
            long lsn = insertLsn();
            ledger.resolved(tx, "committed".equals(status(tx.xid)), lsn);
            done(pending);
            return;
        }
        if (commit) {
            ledger.committed(tx, -1);
        } else {
            ledger.aborted(tx);
        }
        done(pending);
        if (commit) {
            ledger.lsnAfter(tx, insertLsn());
        }
    }

    private void done(Pending pending) {
        pendingPrepared.remove(pending);
        locked.removeAll(pending.keys());
        dirty = true; // what its commit made true is read back from the tables
    }

    /**
     * After a failure: the rows that exist are read back from the tables, and prepared
     * transactions whose PREPARE answer was lost are adopted from {@code pg_prepared_xacts}.
     */
    private void reconcile() throws SQLException {
        hot.clear();
        toast.clear();
        try (Statement s = connection.createStatement()) {
            try (ResultSet rs = s.executeQuery("SELECT id FROM hot")) {
                while (rs.next()) {
                    hot.add(rs.getInt(1));
                }
            }
            try (ResultSet rs = s.executeQuery("SELECT id FROM toast")) {
                while (rs.next()) {
                    toast.add(rs.getInt(1));
                }
            }
            Set<String> known = new HashSet<>();
            pendingPrepared.forEach(p -> known.add(p.tx().gid));
            try (ResultSet rs = s.executeQuery("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'torture\\_%'")) {
                while (rs.next()) {
                    String gid = rs.getString(1);
                    if (known.contains(gid)) {
                        continue;
                    }
                    for (Ledger.Tx tx : ledger.transactions()) {
                        if (gid.equals(tx.gid)) {
                            Set<String> keys = new HashSet<>();
                            tx.changes.forEach(c -> keys.add(c.key()));
                            tx.outcome = Ledger.Outcome.OPEN;
                            pendingPrepared.add(new Pending(tx, keys));
                            locked.addAll(keys);
                        }
                    }
                }
            }
        }
        // rows a prepared transaction changed count as they will be if it commits; they are locked meanwhile
        dirty = false;
    }

    private void resolveUnknown(Ledger.Tx tx) throws SQLException {
        ensureConnected();
        String status = status(tx.xid);
        if ("committed".equals(status)) {
            ledger.resolved(tx, true, insertLsn());
        } else if ("aborted".equals(status)) {
            ledger.resolved(tx, false, -1);
        }
    }

    private String status(long xid) throws SQLException {
        try (Statement s = connection.createStatement(); ResultSet rs = s.executeQuery("SELECT txid_status(" + xid + ")")) {
            rs.next();
            return rs.getString(1);
        }
    }

    private boolean isPrepared(String gid) throws SQLException {
        try (Statement s = connection.createStatement();
             ResultSet rs = s.executeQuery("SELECT 1 FROM pg_prepared_xacts WHERE gid = '" + gid + "'")) {
            return rs.next();
        }
    }

    private long insertLsn() throws SQLException {
        boolean autoCommit = connection.getAutoCommit();
        connection.setAutoCommit(true);
        try (Statement s = connection.createStatement();
             ResultSet rs = s.executeQuery("SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint")) {
            rs.next();
            return rs.getLong(1);
        } finally {
            connection.setAutoCommit(autoCommit);
        }
    }

    /** Connects, waiting out a restart of the server (up to a minute). */
    private void ensureConnected() throws SQLException {
        if (connection != null && !connection.isClosed()) {
            return;
        }
        Instant deadline = Instant.now().plus(Duration.ofMinutes(1));
        while (true) {
            try {
                connection = pg.connect(database);
                connection.setAutoCommit(true);
                try (Statement s = connection.createStatement();
                     ResultSet rs = s.executeQuery("SELECT pg_backend_pid(), set_config('lock_timeout', '10s', false)")) {
                    rs.next();
                    backendPid = rs.getInt(1);
                }
                return;
            } catch (RuntimeException | SQLException e) {
                if (Instant.now().isAfter(deadline)) {
                    throw e instanceof SQLException sql ? sql : new SQLException(e);
                }
                pause(100); // the server is restarting
            }
        }
    }

    private static void pause(long millis) {
        try {
            Thread.sleep(millis); // pacing: waiting out a restart of the server
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    private void exec(String sql) throws SQLException {
        try (Statement s = connection.createStatement()) {
            s.execute(sql);
        }
    }

    /** A statement that must change exactly one row: any other count means the model is wrong, and the step fails. */
    private void update(String sql) throws SQLException {
        try (Statement s = connection.createStatement()) {
            expectOne(s.executeUpdate(sql));
        }
    }

    private void expectOne(int rows) throws SQLException {
        if (rows != 1) {
            dirty = true;
            throw new SQLException("the workload's model of the tables is wrong: " + rows + " rows changed, not 1");
        }
    }

    private void closeQuietly() {
        if (connection != null) {
            try {
                connection.close();
            } catch (SQLException ignored) {
                // a broken connection: nothing to close
            }
            connection = null;
        }
    }

    /** Letters and digits from the seed: text the server cannot compress below its TOAST threshold. */
    private String text(int length) {
        StringBuilder b = new StringBuilder(length);
        String alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        for (int i = 0; i < length; i++) {
            b.append(alphabet.charAt(random.nextInt(alphabet.length())));
        }
        return b.toString();
    }
}
