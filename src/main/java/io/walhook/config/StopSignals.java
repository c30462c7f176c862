package io.walhook.config;

import jakarta.annotation.Priority;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Singleton;

import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.StartupEvent;
import sun.misc.Signal;

/**
 * SIGTERM and SIGINT stop walhook through Quarkus's graceful shutdown (the replication source's
 * drain included) and end with status 0, not the JVM's 143 or 130: an orchestrator stopping
 * walhook is a clean stop, not a failure. Installed at start-up, over Quarkus's own handlers.
 */
@Singleton
public class StopSignals {

    void onStart(@Observes @Priority(1) StartupEvent event) {
        for (String name : new String[] { "TERM", "INT" }) {
            try {
                Signal.handle(new Signal(name), signal -> Quarkus.asyncExit(0));
            } catch (IllegalArgumentException unsupported) {
                // a platform without this signal keeps the default behaviour
            }
        }
    }
}
