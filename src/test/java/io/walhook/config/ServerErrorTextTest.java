package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;

/** PostgreSQL's own errors, shown without the row values they quote. */
class ServerErrorTextTest {

    private static PostgresServer pg;
    private static String database;

    @BeforeAll
    static void database() throws SQLException {
        pg = TestPostgres.shared();
        database = pg.createDatabase("server_errors");
        pg.execute(database, "CREATE TABLE people (id int PRIMARY KEY, ssn text NOT NULL, CHECK (ssn <> '000-00-0000'))",
                "INSERT INTO people VALUES (1, '123-45-6789')",
                "CREATE FUNCTION sealed(n text) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN"
                        + " RAISE EXCEPTION 'row is sealed' USING DETAIL = 'sealed for ' || n; END $$");
    }

    private static SQLException failing(String sql) {
        return catchThrowableOfType(SQLException.class, () -> {
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                s.execute(sql);
            }
        });
    }

    @Test
    void aValueInTheMessageIsNotShown() {
        SQLException e = failing("SELECT ssn::int FROM people");
        assertThat(e.getMessage()).as("the server's own text").contains("123-45-6789");
        assertThat(ServerErrorText.of(e)).isEqualTo("invalid input syntax for type integer: \"…\" (SQLSTATE 22P02)");
    }

    /**
     * A value holding quotes (JSON, an array literal), which PostgreSQL quotes without escaping
     * them: taken pair by pair, what lay between its inner quotes was shown, the row's values
     * included; and a value could pass for a name ({@code a" column "x}).
     */
    @Test
    void aValueHoldingQuotesIsNotShownInPart() {
        SQLException json = failing("SELECT '{\"ssn\": \"123-45-6789\"}'::text::int");
        assertThat(ServerErrorText.of(json)).isEqualTo("invalid input syntax for type integer: \"…\" (SQLSTATE 22P02)");
        SQLException array = failing("SELECT '{\"123-45-6789\",\"x\"'::text[]");
        assertThat(array.getMessage()).contains("malformed array literal");
        assertThat(ServerErrorText.of(array)).isEqualTo("malformed array literal: \"…\" (SQLSTATE 22P02)");
        SQLException named = failing("SELECT 'a\" column \"123-45-6789'::int");
        assertThat(ServerErrorText.of(named)).doesNotContain("123-45-6789").endsWith("(SQLSTATE 22P02)");
    }

    @Test
    void theDetailAndContextAreNotShown() {
        SQLException duplicate = failing("INSERT INTO people VALUES (1, '987-65-4321')");
        assertThat(duplicate.getMessage()).contains("Key (id)=(1)");
        assertThat(ServerErrorText.of(duplicate)).isEqualTo("duplicate key value violates unique constraint \"people_pkey\""
                + " (SQLSTATE 23505)");
        SQLException check = failing("INSERT INTO people VALUES (2, '000-00-0000')");
        assertThat(check.getMessage()).contains("000-00-0000");
        assertThat(ServerErrorText.of(check)).doesNotContain("000-00-0000").contains("\"people\"").contains("23514");
        SQLException raised = failing("SELECT sealed(ssn) FROM people");
        assertThat(raised.getMessage()).contains("123-45-6789");
        assertThat(ServerErrorText.of(raised)).isEqualTo("row is sealed (SQLSTATE P0001)");
    }

    @Test
    void theNamesOfThingsAreShown() {
        assertThat(ServerErrorText.of(failing("SELECT * FROM missing_table")))
                .isEqualTo("relation \"missing_table\" does not exist (SQLSTATE 42P01)");
        assertThat(ServerErrorText.of(failing("SELECT nope FROM people")))
                .isEqualTo("column \"nope\" does not exist (SQLSTATE 42703)");
    }

    @Test
    void aLongOrMultiLineMessageIsOneLineCut() {
        SQLException raised = failing("DO $$ BEGIN RAISE EXCEPTION '%', 'a' || chr(10) || repeat('b', 2000); END $$");
        String shown = ServerErrorText.of(raised);
        assertThat(shown).doesNotContain("\n").startsWith("a b").contains("...").endsWith("(SQLSTATE P0001)");
        assertThat(shown.length()).isLessThanOrEqualTo(ServerErrorText.LENGTH + " (SQLSTATE P0001)".length());
    }
}
