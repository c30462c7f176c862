package io.walhook.config;

import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.annotations.QuarkusMain;

/**
 * walhook's entry point: Quarkus's own, with one JVM setting made before Quarkus loads.
 *
 * <p>Quarkus parses every request target with {@link java.net.URI} before any route runs and
 * answers one that does not parse ({@code GET /subscriptions/%zz}) with a bare 400: no body, no
 * content type, nothing saying what is wrong. Its only switch is the system property
 * {@value #URI_CHECK_PROPERTY}, read once when Quarkus's HTTP layer loads. walhook turns that
 * check off here and makes the same one, and a stricter one, in the first route of every request
 * ({@code io.walhook.api.RequestTargetFilter}), which answers with a problem naming the path or
 * parameter. The tests set the property too ({@code pom.xml}: a {@code @QuarkusTest} does not run
 * this class), and so does the native build, whose HTTP layer is loaded at build time.
 */
@QuarkusMain
public final class WalhookMain {

    /** Quarkus's switch of its request-target check (VertxHttpRecorder). */
    public static final String URI_CHECK_PROPERTY = "vertx.disableURIValidation";

    private WalhookMain() {
    }

    public static void main(String... args) {
        System.setProperty(URI_CHECK_PROPERTY, "true");
        Quarkus.run(args);
    }
}
