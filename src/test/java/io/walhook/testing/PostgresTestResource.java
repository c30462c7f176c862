package io.walhook.testing;

import java.util.Map;

import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;

/**
 * Hands a {@code @QuarkusTest} the URL of a fresh database on the shared test server, as
 * {@code WALHOOK_SOURCE_URL} would. The server outlives the application (one per test run).
 */
public class PostgresTestResource implements QuarkusTestResourceLifecycleManager {

    @Override
    public Map<String, String> start() {
        PostgresServer server = TestPostgres.shared();
        String database = server.createDatabase("walhook");
        // slots belong to the cluster: one per database keeps test runs apart
        return Map.of("walhook.source.url", server.sourceUrl(database), "walhook.slot", database);
    }

    @Override
    public void stop() {
        // the database is dropped with the throwaway cluster at the end of the run
    }
}
