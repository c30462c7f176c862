package io.walhook.config;

import java.util.List;

import org.jboss.logging.Logger;

import io.quarkus.runtime.PreventFurtherStepsException;
import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.QuarkusBindException;
import io.quarkus.runtime.annotations.QuarkusMain;

/**
 * walhook's entry point: Quarkus's own, with one JVM setting made before Quarkus loads, and
 * walhook's own report of a start-up that failed.
 *
 * <p>Quarkus parses every request target with {@link java.net.URI} before any route runs and
 * answers one that does not parse ({@code GET /subscriptions/%zz}) with a bare 400: no body, no
 * content type, nothing saying what is wrong. Its only switch is the system property
 * {@value #URI_CHECK_PROPERTY}, read once when Quarkus's HTTP layer loads. walhook turns that
 * check off here and makes the same one, and a stricter one, in the first route of every request
 * ({@code io.walhook.api.RequestTargetFilter}), which answers with a problem naming the path or
 * parameter. The tests set the property too ({@code pom.xml}: a {@code @QuarkusTest} does not run
 * this class), and so does the native build, whose HTTP layer is loaded at build time.
 *
 * <p>A value Quarkus cannot map ({@code WALHOOK_DELIVERY_CONCURRENCY=four}) fails start-up before
 * any of walhook's code runs. With an exit handler of its own Quarkus prints nothing: walhook
 * logs one line per bad value naming its variable ({@link ConfigReport}) and exits
 * {@value StartupCheck#EXIT_CONFIG}, as {@link StartupCheck} does for the values it checks.
 */
@QuarkusMain
public final class WalhookMain {

    /** Quarkus's switch of its request-target check (VertxHttpRecorder). */
    public static final String URI_CHECK_PROPERTY = "vertx.disableURIValidation";

    private WalhookMain() {
    }

    public static void main(String... args) {
        System.setProperty(URI_CHECK_PROPERTY, "true");
        Quarkus.run(null, WalhookMain::exit, args);
    }

    /** Quarkus's last call, with the exit status and what failed (null when nothing did). */
    static void exit(int status, Throwable failure) {
        int code = status;
        try {
            if (failure != null) {
                code = report(status, failure);
            }
        } catch (Throwable reporting) {
            reporting.printStackTrace();
            code = status == 0 ? 1 : status;
        } finally {
            System.exit(code);
        }
    }

    /** Logs a failed start-up the way an operator can act on it; returns the exit status. */
    static int report(int status, Throwable failure) {
        List<String> invalid = ConfigReport.lines(failure);
        if (!invalid.isEmpty()) {
            // Quarkus configures logging from the configuration it could not map: walhook writes the lines
            boolean json = ConfigReport.jsonLogs(System.getenv(), System.getProperties());
            invalid.forEach(line -> System.out.println(ConfigReport.logLine("walhook cannot start: " + line, json,
                    java.time.Instant.now())));
            return StartupCheck.EXIT_CONFIG;
        }
        Logger log = Logger.getLogger(StartupCheck.class);
        for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof PreventFurtherStepsException stop) {
                // walhook's own stops logged their line (StartupCheck.stop) and carry no message
                if (stop.getMessage() != null && !stop.getMessage().isEmpty()) {
                    log.info(stop.getMessage());
                }
                return status;
            }
            if (t instanceof QuarkusBindException bind) {
                if (QuarkusBindException.isKnownHost(bind.getHost())) {
                    log.errorf("walhook cannot start: port %d on %s is in use by another process (%s); free it or"
                            + " choose another (QUARKUS_HTTP_PORT, or QUARKUS_MANAGEMENT_PORT for the management"
                            + " interface)", bind.getPort(), bind.getHost(), bind.getMessage());
                } else {
                    log.errorf("walhook cannot start: cannot listen on %s port %d (%s); QUARKUS_HTTP_HOST must be an"
                            + " address of this machine, or 0.0.0.0", bind.getHost(), bind.getPort(), bind.getMessage());
                }
                return status;
            }
        }
        log.error("walhook failed to start", failure);
        return status;
    }
}
