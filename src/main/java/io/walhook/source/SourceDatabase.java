package io.walhook.source;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.Optional;

import javax.sql.DataSource;

import org.jboss.logging.Logger;

import io.walhook.config.SessionTimeout;
import io.walhook.pgoutput.Lsn;

/**
 * Checks that the source database can feed walhook and creates the publication and slot when
 * missing. Every refusal names the fix. An existing publication or slot is used as it is.
 */
public final class SourceDatabase {

    private static final Logger LOG = Logger.getLogger(SourceDatabase.class);

    /** What the slot looks like to the server. */
    public record SlotState(boolean exists, String plugin, String database, String walStatus, Lsn confirmedFlush,
            boolean twoPhase) {
    }

    private final DataSource dataSource;

    public SourceDatabase(DataSource dataSource) {
        this.dataSource = dataSource;
    }

    /** The server's major version (14 to 18 supported). */
    public int serverMajor() throws SQLException {
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT current_setting('server_version_num')::int / 10000")) {
            rs.next();
            return rs.getInt(1);
        }
    }

    /**
     * Fails with the fix spelled out unless the server can stream logical changes to this role.
     */
    public void checkPrerequisites() throws SQLException {
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT current_setting('wal_level'), current_setting('server_version_num')::int,"
                     + " r.rolreplication OR r.rolsuper, current_user"
                     + " FROM pg_roles r WHERE r.rolname = current_user")) {
            rs.next();
            String walLevel = rs.getString(1);
            int version = rs.getInt(2);
            boolean canReplicate = rs.getBoolean(3);
            String user = rs.getString(4);
            if (version < 140000) {
                throw new SourceSetupException("PostgreSQL " + version / 10000 + " is too old: walhook needs PostgreSQL 14 or newer");
            }
            if (!"logical".equals(walLevel)) {
                throw new SourceSetupException("the server has wal_level = " + walLevel + "; walhook needs logical:"
                        + " run ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL");
            }
            if (!canReplicate) {
                throw new SourceSetupException("role " + user + " may not replicate: run ALTER ROLE " + quote(user)
                        + " REPLICATION; as a superuser (or connect as a role that has it)");
            }
        }
    }

    /** The publication's oid, or null when there is none of that name. */
    public Long publicationOid(String name) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT oid::bigint FROM pg_catalog.pg_publication WHERE pubname = ?")) {
            s.setString(1, name);
            try (ResultSet rs = s.executeQuery()) {
                return rs.next() ? rs.getLong(1) : null;
            }
        }
    }

    /**
     * Creates the publication unless it exists; {@code tables} is {@code *} or {@code schema.table,...}.
     * True when it created it.
     */
    public boolean ensurePublication(String name, String tables) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            try (PreparedStatement s = c.prepareStatement("SELECT 1 FROM pg_publication WHERE pubname = ?")) {
                s.setString(1, name);
                try (ResultSet rs = s.executeQuery()) {
                    if (rs.next()) {
                        return false;
                    }
                }
            }
            String target;
            if (tables.strip().equals("*")) {
                target = "FOR ALL TABLES";
            } else {
                StringBuilder list = new StringBuilder("FOR TABLE ");
                String sep = "";
                for (String table : tables.split(",")) {
                    String[] parts = table.strip().split("\\.", 2);
                    list.append(sep).append(quote(parts[0])).append('.').append(quote(parts[1]));
                    sep = ", ";
                }
                target = list.toString();
            }
            try {
                // it waits for a lock on each table (behind a VACUUM, an ALTER TABLE): as long as that takes
                SessionTimeout.unlimited(dataSource, c, u -> {
                    try (Statement s = u.createStatement()) {
                        return s.execute("CREATE PUBLICATION " + quote(name) + " " + target);
                    }
                });
                LOG.infof("created publication %s %s", name, target);
                return true;
            } catch (SQLException e) {
                if (e.getSQLState() != null && (e.getSQLState().startsWith("08") || e.getSQLState().startsWith("57P"))) {
                    throw e; // the server went away, not a refusal: start-up tries again
                }
                String hint = target.equals("FOR ALL TABLES")
                        ? "a publication FOR ALL TABLES needs a superuser: create it yourself, or set"
                                + " WALHOOK_PUBLICATION_TABLES to the tables walhook should stream"
                        : "create it yourself (CREATE PUBLICATION " + name + " " + target + ") or fix WALHOOK_PUBLICATION_TABLES";
                throw new SourceSetupException("WALHOOK_PUBLICATION", "cannot create publication " + name + ": "
                        + e.getMessage() + "; " + hint, e);
            }
        }
    }

    /** The tables of the publication, each as its schema and its name (either may hold a dot). */
    public List<String[]> publishedTables(String publication) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT schemaname, tablename FROM"
                     + " pg_catalog.pg_publication_tables WHERE pubname = ?")) {
            s.setString(1, publication);
            List<String[]> tables = new java.util.ArrayList<>();
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    tables.add(new String[] {rs.getString(1), rs.getString(2)});
                }
            }
            return tables;
        }
    }

    public SlotState slot(String name) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT plugin, database, wal_status, confirmed_flush_lsn::text,"
                     + " two_phase FROM pg_replication_slots WHERE slot_name = ?")) {
            s.setString(1, name);
            try (ResultSet rs = s.executeQuery()) {
                if (!rs.next()) {
                    return new SlotState(false, null, null, null, Lsn.INVALID, false);
                }
                String confirmed = rs.getString(4);
                return new SlotState(true, rs.getString(1), rs.getString(2), rs.getString(3),
                        confirmed == null ? Lsn.INVALID : Lsn.parse(confirmed), rs.getBoolean(5));
            }
        }
    }

    /**
     * Makes sure the slot exists and can be used. A slot is created only on a first start (no
     * checkpoint): when it vanished after walhook acknowledged positions on it, the changes since
     * then are lost to it, and walhook says so instead of quietly starting over.
     */
    public void ensureSlot(String name, Optional<Lsn> checkpoint) throws SQLException {
        SlotState slot = slot(name);
        String database;
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT current_database()")) {
            rs.next();
            database = rs.getString(1);
        }
        if (!slot.exists()) {
            if (checkpoint.isPresent()) {
                throw SourceSetupException.about("WALHOOK_SLOT", "replication slot " + name + " is gone although walhook acknowledged up"
                        + " to " + checkpoint.get() + " on it: changes since then may be lost. To start afresh from now,"
                        + " delete its checkpoint (DELETE FROM <state schema>.checkpoint WHERE slot_name = '" + name
                        + "') and restart walhook");
            }
            try (Connection c = dataSource.getConnection()) {
                // waits for the transactions open now to end, however long they last
                String at = SessionTimeout.unlimited(dataSource, c, u -> {
                    try (PreparedStatement s = u.prepareStatement(
                            "SELECT lsn::text FROM pg_create_logical_replication_slot(?, 'pgoutput')")) {
                        s.setString(1, name);
                        try (ResultSet rs = s.executeQuery()) {
                            rs.next();
                            return rs.getString(1);
                        }
                    }
                });
                LOG.infof("created replication slot %s (pgoutput) at %s", name, at);
            }
            return;
        }
        if (!"pgoutput".equals(slot.plugin())) {
            throw SourceSetupException.about("WALHOOK_SLOT", "replication slot " + name + " uses plugin " + slot.plugin()
                    + ", not pgoutput: choose another WALHOOK_SLOT or drop that slot");
        }
        if (!database.equals(slot.database())) {
            throw SourceSetupException.about("WALHOOK_SLOT", "replication slot " + name + " belongs to database " + slot.database()
                    + ", not " + database + ": choose another WALHOOK_SLOT");
        }
        if (slot.twoPhase()) {
            // such a slot sends prepared transactions at PREPARE, before they are known to commit
            throw SourceSetupException.about("WALHOOK_SLOT", "replication slot " + name + " has two_phase enabled; walhook delivers"
                    + " prepared transactions when they commit and needs a slot without it: choose another WALHOOK_SLOT"
                    + " and let walhook create it");
        }
        if ("lost".equals(slot.walStatus())) {
            throw SourceSetupException.about("WALHOOK_SLOT", invalidated(name));
        }
    }

    static String invalidated(String slot) {
        return "replication slot " + slot + " is invalidated (wal_status lost: the server removed WAL it still needed,"
                + " see max_slot_wal_keep_size): changes were lost to it. Drop and recreate the slot, delete its"
                + " checkpoint, and restart walhook";
    }

    static String quote(String identifier) {
        return "\"" + identifier.replace("\"", "\"\"") + "\"";
    }
}
