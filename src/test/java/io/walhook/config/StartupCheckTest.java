package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The checks that need no network, on the values an operator sets. */
class StartupCheckTest {

    private static WalhookConfig config(Map<String, String> properties) {
        Map<String, String> all = new HashMap<>(Map.of("walhook.source.url", "postgresql://app@db.internal:5432/app"));
        all.putAll(properties);
        return WalhookConfigTest.mapping(all);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "walhook.state-schema=WalHook    | WALHOOK_STATE_SCHEMA 'WalHook' is not a plain identifier: use lower-case",
        "walhook.state-schema=wal-hook   | WALHOOK_STATE_SCHEMA 'wal-hook' is not a plain identifier",
        "walhook.publication=Changes     | WALHOOK_PUBLICATION 'Changes' is not a plain identifier: use lower-case",
        "walhook.slot=Orders             | WALHOOK_SLOT 'Orders' is not a replication slot name",
        "walhook.api-token=CHANGE_ME     | WALHOOK_API_TOKEN is a placeholder (it says change me): set a token of your own",
        "walhook.api-read-token=demo-token-change-me | WALHOOK_API_READ_TOKEN is a placeholder",
        "walhook.api-token=ChangeMe      | WALHOOK_API_TOKEN is a placeholder",
        "walhook.api-token=<change me>   | WALHOOK_API_TOKEN is a placeholder",
        "walhook.api-token=pässwort-1234 | WALHOOK_API_TOKEN holds a character that is not printable ASCII (at position 2)",
        "walhook.api-read-token=read\tonly token | WALHOOK_API_READ_TOKEN holds a character that is not printable ASCII (at position 5)",
        "walhook.api-token=s3cr3t-aaaa;walhook.api-read-token=s3cr3t-aaaa | WALHOOK_API_READ_TOKEN is the same as WALHOOK_API_TOKEN",
        "walhook.source.spill-directory=/etc/passwd | WALHOOK_SOURCE_SPILL_DIRECTORY is /etc/passwd, which is a file",
        "walhook.source.spill-directory=/proc/walhook-spill | WALHOOK_SOURCE_SPILL_DIRECTORY is /proc/walhook-spill, where walhook cannot write",
        "walhook.source.url=postgresql://app@db.internal:70000/app | WALHOOK_SOURCE_URL has a port outside 1 to 65535",
        // a password holding '/' whose digits before it were read as the port: they are not shown
        "walhook.source.url=postgresql://app:20240611/s3cr3t@db/orders | WALHOOK_SOURCE_URL has a port outside 1 to 65535, or a password holding",
        "walhook.source.url=postgresql://app:20240611?s3cr3t@db/orders | WALHOOK_SOURCE_URL has a port outside 1 to 65535, or a password holding",
        "walhook.source.url=postgresql://app@ops:20240611/s3cr3t@db/orders | WALHOOK_SOURCE_URL has a port outside 1 to 65535, or a password holding",
        "walhook.amqp-url=amqp://broker:70000 | WALHOOK_AMQP_URL has a port outside 1 to 65535",
        "walhook.amqp-url=amqp://broker:0 | WALHOOK_AMQP_URL has a port outside 1 to 65535",
        // set to blanks only: each was taken as set and as unset in turn (an AMQP subscription passed the check that a
        // broker is configured, and had none; a spill directory " " went unchecked, then was a folder named " ")
        "'walhook.amqp-url=   '           | WALHOOK_AMQP_URL is blank",
        "'walhook.api-token= '            | WALHOOK_API_TOKEN is blank",
        "'walhook.api-read-token=	'      | WALHOOK_API_READ_TOKEN is blank",
        "'walhook.source.user=  '         | WALHOOK_SOURCE_USER is blank",
        "'walhook.source.spill-directory= ' | WALHOOK_SOURCE_SPILL_DIRECTORY is blank",
    })
    void aBadValueStopsStartupNamingItsVariable(String assignments, String problem) {
        Map<String, String> values = new HashMap<>();
        for (String assignment : assignments.split(";")) {
            String[] kv = assignment.split("=", 2);
            values.put(kv[0], kv[1]);
        }
        assertThatThrownBy(() -> StartupCheck.validate(config(values)))
                .isInstanceOf(ConfigException.class)
                .hasMessageStartingWith(problem)
                .satisfies(e -> assertThat(e.getMessage()).doesNotContain("s3cr3t").doesNotContain("20240611"));
    }

    @ParameterizedTest
    @CsvSource({"walhook.state-schema, walhook_state", "walhook.publication, cdc_all", "walhook.slot, orders_1"})
    void plainLowerCaseNamesPass(String property, String value) {
        assertThat(StartupCheck.validate(config(Map.of(property, value))).database()).isEqualTo("app");
    }

    @org.junit.jupiter.api.Test
    void aDatabaseRestartingWhileTheSchemaIsSetUpIsWaitedForButAWrongUrlIsNot() {
        // what pgjdbc throws, wrapped (as a pool or driver may wrap it; SchemaMigrations passes it on bare)
        java.util.function.Function<String, RuntimeException> failure = state -> new IllegalStateException("migration failed",
                new org.postgresql.util.PSQLException("server said " + state, org.postgresql.util.PSQLState.UNKNOWN_STATE) {
                    @Override
                    public String getSQLState() {
                        return state;
                    }
                });
        assertThat(StartupCheck.restarting(failure.apply("57P01"), 1)).as("terminating connection due to administrator command").isTrue();
        assertThat(StartupCheck.restarting(new org.postgresql.util.PSQLException("the database system is shutting down",
                org.postgresql.util.PSQLState.UNKNOWN_STATE) {
            @Override
            public String getSQLState() {
                return "57P03";
            }
        }, 1)).as("bare, as the schema migrations throw it").isTrue();
        assertThat(StartupCheck.restarting(failure.apply("57P03"), 1)).as("the database system is starting up").isTrue();
        assertThat(StartupCheck.restarting(failure.apply("08006"), 1)).as("the connection broke").isTrue();
        assertThat(StartupCheck.restarting(failure.apply("08003"), 1)).as("this connection has been closed").isTrue();
        assertThat(StartupCheck.restarting(failure.apply("08001"), 1)).as("refused at the first attempt: a wrong URL").isFalse();
        assertThat(StartupCheck.restarting(failure.apply("08001"), 2)).as("refused while it restarts").isTrue();
        assertThat(StartupCheck.restarting(failure.apply("28P01"), 2)).as("a wrong password").isFalse();
        assertThat(StartupCheck.restarting(failure.apply("42501"), 2)).as("no permission to create the schema").isFalse();
        assertThat(StartupCheck.restarting(new IllegalStateException("no SQL state"), 2)).isFalse();
        assertThat(StartupCheck.restarting(new java.sql.SQLException("Acquisition timeout while waiting for new connection",
                new java.util.concurrent.TimeoutException()), 1)).as("the pool's: a server too busy to answer").isTrue();
    }

    @org.junit.jupiter.api.Test
    void aTlsHandshakeFailureIsASettingNotARestart() {
        assertThat(StartupCheck.tls(new org.postgresql.util.PSQLException("SSL error: PKIX path building failed",
                org.postgresql.util.PSQLState.CONNECTION_FAILURE, new javax.net.ssl.SSLHandshakeException("PKIX path building failed"))))
                .isTrue();
        assertThat(StartupCheck.tls(new org.postgresql.util.PSQLException("The hostname db could not be verified by"
                + " hostnameverifier PgjdbcHostnameVerifier.", org.postgresql.util.PSQLState.CONNECTION_FAILURE))).isTrue();
        assertThat(StartupCheck.tls(new org.postgresql.util.PSQLException("terminating connection due to administrator command",
                org.postgresql.util.PSQLState.CONNECTION_FAILURE))).isFalse();
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "WALHOOK_SUBSCRIPTIONS_ORDERS_TABLE=public.orders | WALHOOK_SUBSCRIPTIONS_ORDERS_TABLE is not a walhook setting (did you mean WALHOOK_SUBSCRIPTIONS_ORDERS_TABLES?)",
        "WALHOOK_SUBSCRIPTIONS_ORDERS_FILTERS=new.id == 1 | WALHOOK_SUBSCRIPTIONS_ORDERS_FILTERS is not a walhook setting (did you mean WALHOOK_SUBSCRIPTIONS_ORDERS_FILTER?)",
        "WALHOOK_SLOTS=orders                             | WALHOOK_SLOTS is not a walhook setting (did you mean WALHOOK_SLOT?)",
        "WALHOOK_SUBSCRIPTIONS_URL=https://x              | WALHOOK_SUBSCRIPTIONS_URL is not a walhook setting",
        "WALHOOK_SUBSCRIPTIONS_MY_ORDERS_URL=https://x    | WALHOOK_SUBSCRIPTIONS_MY_ORDERS_URL names subscription 'MY_ORDERS': a subscription's name is a letter",
        "WALHOOK_SUBSCRIPTIONS_2_URL=https://x            | WALHOOK_SUBSCRIPTIONS_2_URL names subscription '2'",
        "WALHOOK_SUBSCRIPTIONS_ORDERS_FILTER=             | WALHOOK_SUBSCRIPTIONS_ORDERS_FILTER is empty: give it a value",
        "WALHOOK_SUBSCRIPTIONS_ORDERS_TABLES=<blank>      | WALHOOK_SUBSCRIPTIONS_ORDERS_TABLES is empty",
    })
    void aVariableWalhookWouldIgnoreStopsStartupNamingIt(String assignment, String problem) {
        String[] kv = assignment.split("=", 2);
        Map<String, String> env = new HashMap<>(Map.of("PATH", "/bin", "WALHOOK_SOURCE_URL", "postgresql://a@b/c",
                "WALHOOK_SUBSCRIPTIONS_ORDERS_URL", "https://x", kv[0], kv[1].replace("<blank>", "  ")));
        assertThatThrownBy(() -> StartupCheck.environment(env)).isInstanceOf(ConfigException.class)
                .hasMessageStartingWith(problem);
    }

    @org.junit.jupiter.api.Test
    void everyVariableWalhookReadsPasses() {
        Map<String, String> env = new HashMap<>(Map.of("PATH", "/bin", "WALHOOK_TEST_PG_URL", "postgresql://a@b/c"));
        // what Kubernetes gives every pod for the Service deploy/k8s/service.yaml makes, and for another walhook-db
        for (String link : List.of("WALHOOK_SERVICE_HOST", "WALHOOK_SERVICE_PORT", "WALHOOK_SERVICE_PORT_HTTP", "WALHOOK_PORT",
                "WALHOOK_PORT_8080_TCP", "WALHOOK_PORT_8080_TCP_PROTO", "WALHOOK_PORT_8080_TCP_PORT",
                "WALHOOK_PORT_8080_TCP_ADDR", "WALHOOK_DB_SERVICE_HOST", "WALHOOK_DB_PORT_5432_TCP")) {
            env.put(link, "10.0.0.1");
        }
        for (ConfigReference.Property p : ConfigReference.properties()) {
            env.put(p.envVar().replace(ConfigReference.KEY, "ORDERS2"), "1");
        }
        StartupCheck.environment(env);
        // and the lists it checks against are walhook's configuration, no more, no less
        java.util.Set<String> settings = new java.util.TreeSet<>();
        java.util.Set<String> fields = new java.util.TreeSet<>();
        for (ConfigReference.Property p : ConfigReference.properties()) {
            if (p.envVar().contains(ConfigReference.KEY)) {
                fields.add(p.envVar().substring(p.envVar().indexOf(ConfigReference.KEY) + ConfigReference.KEY.length() + 1));
            } else {
                settings.add(p.envVar());
            }
        }
        assertThat(new java.util.TreeSet<>(StartupCheck.SETTINGS)).isEqualTo(settings);
        assertThat(new java.util.TreeSet<>(StartupCheck.SUBSCRIPTION_FIELDS)).isEqualTo(fields);
    }
}
