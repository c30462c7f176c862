package io.walhook.testing;

import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;

/** A real PostgreSQL with {@code wal_level=logical} that a test may use; see {@link TestPostgres}. */
public interface PostgresServer {

    AtomicInteger DATABASES = new AtomicInteger();

    int major();

    String host();

    int port();

    String user();

    String password();

    /** The database every connection opens unless told otherwise. */
    String defaultDatabase();

    /** The directory of initdb, psql, pg_recvlogical...; empty for a server this harness did not start. */
    Optional<Path> binDir();

    default String jdbcUrl(String database) {
        return "jdbc:postgresql://" + host() + ":" + port() + "/" + database;
    }

    /** The form of {@code WALHOOK_SOURCE_URL}. */
    default String sourceUrl(String database) {
        String credentials = password() == null || password().isEmpty() ? user() : user() + ":" + password();
        return "postgresql://" + credentials + "@" + host() + ":" + port() + "/" + database;
    }

    default Connection connect(String database) throws SQLException {
        return DriverManager.getConnection(jdbcUrl(database), user(), password());
    }

    /** Runs statements in a database, each on its own (autocommit). */
    default void execute(String database, String... statements) throws SQLException {
        try (Connection c = connect(database); Statement s = c.createStatement()) {
            for (String statement : statements) {
                s.execute(statement);
            }
        }
    }

    /** Creates a fresh database so a test owns its slots, publications and tables. */
    default String createDatabase(String prefix) {
        String name = prefix + "_" + ProcessHandle.current().pid() + "_" + DATABASES.incrementAndGet();
        try (Connection c = connect(defaultDatabase()); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE " + name);
            return name;
        } catch (SQLException e) {
            throw new HarnessException("cannot create database " + name + " on " + host() + ":" + port() + ": " + e.getMessage(), e);
        }
    }

    void stop();
}
