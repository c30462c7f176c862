package io.walhook.testing;

import java.nio.file.Path;
import java.util.Optional;

import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.PostgreSQLContainer;

/** PostgreSQL in a container, for developers whose machine runs Docker ({@code -Dharness.pg.provider=testcontainers}). */
final class ContainerPostgres implements PostgresServer {

    private final int major;
    private final PostgreSQLContainer<?> container;

    private ContainerPostgres(int major, PostgreSQLContainer<?> container) {
        this.major = major;
        this.container = container;
    }

    static ContainerPostgres start(int major) {
        if (!DockerClientFactory.instance().isDockerAvailable()) {
            throw new HarnessException("-Dharness.pg.provider=testcontainers needs a Docker engine and none answers here;"
                    + " drop the property to use the embedded PostgreSQL");
        }
        PostgreSQLContainer<?> container = new PostgreSQLContainer<>("postgres:" + major)
                .withCommand("postgres", "-c", "wal_level=logical", "-c", "max_prepared_transactions=20",
                        "-c", "max_replication_slots=100", "-c", "max_wal_senders=100", "-c", "fsync=off");
        container.start();
        return new ContainerPostgres(major, container);
    }

    @Override public int major() { return major; }
    @Override public String host() { return container.getHost(); }
    @Override public int port() { return container.getFirstMappedPort(); }
    @Override public String user() { return container.getUsername(); }
    @Override public String password() { return container.getPassword(); }
    @Override public String defaultDatabase() { return container.getDatabaseName(); }
    @Override public Optional<Path> binDir() { return Optional.empty(); }
    @Override public void stop() { container.stop(); }
}
