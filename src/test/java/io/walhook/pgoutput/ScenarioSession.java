package io.walhook.pgoutput;

import java.io.IOException;
import java.io.StringReader;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Map;
import org.postgresql.copy.CopyManager;
import org.postgresql.core.BaseConnection;

/**
 * One SQL session of a {@link PgOutputScenario} on a live server (autocommit on: transactions are
 * written out with BEGIN and COMMIT as the scenario reads), and the facts it records for the checks.
 */
final class ScenarioSession implements AutoCloseable {

    private final int major;
    private final Connection connection;
    private final Map<String, Long> facts;
    private final ConnectionSource source;

    /** Opens further sessions on the same database, for scenarios with concurrent transactions. */
    interface ConnectionSource {
        Connection open() throws SQLException;
    }

    ScenarioSession(int major, ConnectionSource source, Map<String, Long> facts) throws SQLException {
        this.major = major;
        this.source = source;
        this.connection = source.open();
        this.connection.setAutoCommit(true);
        this.facts = facts;
    }

    int major() {
        return major;
    }

    /** Runs each statement in turn. */
    void exec(String... statements) {
        for (String sql : statements) {
            try (Statement s = connection.createStatement()) {
                s.execute(sql);
            } catch (SQLException e) {
                throw new IllegalStateException("PostgreSQL " + major + ": " + sql + ": " + e.getMessage(), e);
            }
        }
    }

    long queryLong(String sql) {
        try (Statement s = connection.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            if (!rs.next()) {
                throw new IllegalStateException("no row from " + sql);
            }
            return rs.getLong(1);
        } catch (SQLException e) {
            throw new IllegalStateException("PostgreSQL " + major + ": " + sql + ": " + e.getMessage(), e);
        }
    }

    /** Records the current transaction's id (assigning one) as fact {@code xid.<name>}. */
    void recordXid(String name) {
        // pg_current_xact_id() is an xid8 (epoch and xid): the wire carries the low 32 bits.
        fact("xid." + name, queryLong("SELECT pg_current_xact_id()::text::bigint") & 0xFFFF_FFFFL);
    }

    /** Records the xmin of a row, the (sub)transaction that wrote it, as fact {@code xid.<name>}. */
    void recordRowXid(String name, String table, String where) {
        fact("xid." + name, queryLong("SELECT xmin::text::bigint FROM " + table + " WHERE " + where));
    }

    /** Records a table's OID from pg_class as fact {@code oid.<name>}. */
    void recordTable(String name, String regclass) {
        fact("oid." + name, queryLong("SELECT oid::bigint FROM pg_class WHERE oid = '" + regclass + "'::regclass"));
    }

    /** Records a type's OID from pg_type as fact {@code type.<name>}. */
    void recordType(String name, String regtype) {
        fact("type." + name, queryLong("SELECT oid::bigint FROM pg_type WHERE oid = '" + regtype + "'::regtype"));
    }

    void fact(String name, long value) {
        if (facts.putIfAbsent(name, value) != null) {
            throw new IllegalStateException("fact " + name + " recorded twice");
        }
    }

    /** {@code COPY ... FROM STDIN} with these rows in text format. */
    void copyIn(String copySql, String rows) {
        try {
            new CopyManager(connection.unwrap(BaseConnection.class)).copyIn(copySql, new StringReader(rows));
        } catch (SQLException | IOException e) {
            throw new IllegalStateException("PostgreSQL " + major + ": " + copySql + ": " + e.getMessage(), e);
        }
    }

    /** Another session on the same database, sharing the facts. */
    ScenarioSession another() {
        try {
            return new ScenarioSession(major, source, facts);
        } catch (SQLException e) {
            throw new IllegalStateException("PostgreSQL " + major + ": cannot open another session: " + e.getMessage(), e);
        }
    }

    @Override
    public void close() {
        try {
            connection.close();
        } catch (SQLException e) {
            // closing a test session: nothing to do
        }
    }
}
