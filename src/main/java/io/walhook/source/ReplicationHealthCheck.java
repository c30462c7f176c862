package io.walhook.source;

import jakarta.inject.Inject;
import jakarta.inject.Singleton;

import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.HealthCheckResponseBuilder;
import org.eclipse.microprofile.health.Readiness;

/** Ready only while the replication stream is up; an invalid slot says so here too. */
@Readiness
@Singleton
public class ReplicationHealthCheck implements HealthCheck {

    private final ReplicationSource source;

    @Inject
    public ReplicationHealthCheck(ReplicationSource source) {
        this.source = source;
    }

    @Override
    public HealthCheckResponse call() {
        SourceStatus status = source.status();
        HealthCheckResponseBuilder response = HealthCheckResponse.named("replication");
        if (status == null) {
            return response.down().withData("state", "STARTING").build();
        }
        response.status(status.state() == SourceStatus.State.STREAMING)
                .withData("state", status.state().name())
                .withData("acknowledged_lsn", status.acknowledged().toString());
        if (status.lastError() != null) {
            response.withData("last_error", status.lastError());
        }
        return response.build();
    }
}
