package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashMap;
import java.util.Map;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The checks that need no network, on the values an operator sets. */
class StartupCheckTest {

    private static WalhookConfig config(Map<String, String> properties) {
        Map<String, String> all = new HashMap<>(Map.of("walhook.source.url", "postgresql://app@db.internal:5432/app"));
        all.putAll(properties);
        return TuningTest.mapping(all);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "walhook.state-schema=WalHook    | WALHOOK_STATE_SCHEMA 'WalHook' is not a plain identifier: use lower-case",
        "walhook.state-schema=wal-hook   | WALHOOK_STATE_SCHEMA 'wal-hook' is not a plain identifier",
        "walhook.publication=Changes     | WALHOOK_PUBLICATION 'Changes' is not a plain identifier: use lower-case",
        "walhook.slot=Orders             | WALHOOK_SLOT 'Orders' is not a replication slot name",
        "walhook.delivery.concurrency=65 | WALHOOK_DELIVERY_CONCURRENCY is 65; it must be between 1 and 64",
    })
    void aBadValueStopsStartupNamingItsVariable(String assignment, String problem) {
        String[] kv = assignment.split("=", 2);
        assertThatThrownBy(() -> StartupCheck.validate(config(Map.of(kv[0], kv[1]))))
                .isInstanceOf(ConfigProblem.class)
                .hasMessageStartingWith(problem);
    }

    @ParameterizedTest
    @CsvSource({"walhook.state-schema, walhook_state", "walhook.publication, cdc_all", "walhook.slot, orders_1"})
    void plainLowerCaseNamesPass(String property, String value) {
        assertThat(StartupCheck.validate(config(Map.of(property, value))).database()).isEqualTo("app");
    }
}
