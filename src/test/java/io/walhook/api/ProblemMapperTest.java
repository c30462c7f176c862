package io.walhook.api;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.SQLException;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Which database failures of the API are the client's to retry (503) and which are walhook's (500). */
class ProblemMapperTest {

    @ParameterizedTest
    @CsvSource(nullValues = "none", value = {
        "08001, 503", // connection refused
        "08006, 503", // connection lost
        "57P01, 503", // the server is shutting down
        "53300, 503", // too many connections
        "28P01, 503", // walhook's password refused (rotated)
        "28000, 503", // walhook not admitted (pg_hba.conf, a client certificate)
        "none,  503", // the pool timed out waiting for a connection
        "57014, 503", // the statement_timeout, or an operator, cancelled the statement
        "55P03, 503", // a lock not granted within lock_timeout
        "40P01, 503", // a deadlock, the other transaction went on
        "42P01, 500", // an undefined table: walhook's own mistake
        "23505, 500", // a unique violation
    })
    void aDatabaseThatCannotBeReachedIsUnavailableAndAnyOtherFailureIsAnError(String sqlState, int status) {
        jakarta.ws.rs.core.Response response = new ProblemMapper().database(new SQLException("failed", sqlState));
        assertThat(response.getStatus()).isEqualTo(status);
        assertThat(response.getMediaType().toString()).startsWith("application/problem+json");
    }

    @org.junit.jupiter.api.Test
    void aStatementTheServerGaveUpOnIsToRetryAndSaysWhy() {
        jakarta.ws.rs.core.Response response = new ProblemMapper().database(
                new SQLException("ERROR: canceling statement due to statement timeout\n  Where: ...", "57014"));
        assertThat(((ApiProblem.Body) response.getEntity()).detail())
                .contains("canceling statement due to statement timeout").contains("retry").doesNotContain("Where");
    }

    @org.junit.jupiter.api.Test
    void noConnectionFreeNamesTheApisPool() {
        jakarta.ws.rs.core.Response response = new ProblemMapper().database(new SQLException("Sorry, acquisition timeout!"));
        assertThat(((ApiProblem.Body) response.getEntity()).detail()).contains("QUARKUS_DATASOURCE_API_JDBC_MAX_SIZE");
    }
}
