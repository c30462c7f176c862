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
        assertThat(ServerErrorText.of(raised)).doesNotContain("123-45-6789").endsWith("(SQLSTATE P0001)");
    }

    /**
     * A function's own words, a row's values unquoted among them (a row security policy's function
     * raising {@code 'no access to %', ssn}), under any SQLSTATE it chose: left out. They were shown
     * whole, to every holder of the read token, in a backfill's error.
     */
    @Test
    void theWordsOfAnErrorAFunctionRaisedAreNotShown() {
        SQLException raised = failing("DO $$ DECLARE v text; BEGIN SELECT ssn INTO v FROM people WHERE id = 1;"
                + " RAISE EXCEPTION 'no access to %', v; END $$");
        assertThat(raised.getMessage()).contains("no access to 123-45-6789");
        assertThat(ServerErrorText.of(raised)).doesNotContain("123-45-6789").contains("a function raised an error")
                .endsWith("(SQLSTATE P0001)");
        SQLException chosen = failing("DO $$ DECLARE v text; BEGIN SELECT ssn INTO v FROM people WHERE id = 1;"
                + " RAISE EXCEPTION 'no access to %', v USING ERRCODE = 'insufficient_privilege'; END $$");
        assertThat(ServerErrorText.of(chosen)).doesNotContain("123-45-6789").endsWith("(SQLSTATE 42501)");
        SQLException asserted = failing("DO $$ DECLARE v text; BEGIN SELECT ssn INTO v FROM people WHERE id = 1;"
                + " ASSERT v IS NULL, 'ssn ' || v; END $$");
        assertThat(ServerErrorText.of(asserted)).doesNotContain("123-45-6789").endsWith("(SQLSTATE P0004)");
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
        // a server's words with a control character in them, and no end (a client's own error, as the driver gives it)
        SQLException long_ = new SQLException("a\tb" + "c".repeat(2000) + "\nsecond line", "08006");
        String shown = ServerErrorText.of(long_);
        assertThat(shown).doesNotContain("\t").doesNotContain("second line").startsWith("a bc").contains("...")
                .endsWith("(SQLSTATE 08006)");
        assertThat(shown.length()).isLessThanOrEqualTo(ServerErrorText.LENGTH + " (SQLSTATE 08006)".length());
        // a function's raised words over lines: left out, in one line
        SQLException raised = failing("DO $$ BEGIN RAISE EXCEPTION '%', 'a' || chr(10) || repeat('b', 2000); END $$");
        assertThat(ServerErrorText.of(raised)).doesNotContain("\n").doesNotContain("bbb").endsWith("(SQLSTATE P0001)");
    }
}
