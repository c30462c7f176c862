package io.walhook.pipeline;

import jakarta.inject.Inject;
import jakarta.inject.Singleton;

import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.HealthCheckResponseBuilder;
import org.eclipse.microprofile.health.Readiness;
import io.walhook.source.SourceStatus;

/**
 * Ready while the replication stream is up, routing runs and the publication is there (an invalid
 * slot, a stopped routing thread or a dropped publication says so here too), and while this
 * instance stands by for the active one.
 */
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
        HealthCheckResponseBuilder response = HealthCheckResponse.named("replication")
                .withData("role", source.role().wireName());
        if (source.role() == ReplicationSource.Role.STANDBY) {
            // ready to take over and to serve the API: a rolling update can proceed
            return response.up().withData("state", "STANDBY").build();
        }
        if (status == null) {
            return response.down().withData("state", "STARTING").build();
        }
        String routingFailure = source.routingFailure();
        if (routingFailure != null) {
            return response.down().withData("state", "ROUTING_STOPPED").build();
        }
        if (source.publicationProblem() != null) {
            return response.down().withData("state", "PUBLICATION_MISSING").build();
        }
        // the state, never the reason: readiness is open to anyone, and the reason names the database's host and port
        // or its user ("password authentication failed for user ..."); /status (with the token) and the log give it
        return response.status(status.state() == SourceStatus.State.STREAMING)
                .withData("state", status.state().name())
                .withData("acknowledged_lsn", status.acknowledged().toString())
                .build();
    }
}
