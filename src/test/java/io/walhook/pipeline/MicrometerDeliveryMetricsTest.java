package io.walhook.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import org.junit.jupiter.api.Test;

import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.micrometer.prometheus.PrometheusConfig;
import io.micrometer.prometheus.PrometheusMeterRegistry;
import io.walhook.change.Operation;
import io.walhook.routing.Destination;
import io.walhook.routing.EventFormat;
import io.walhook.routing.Projection;
import io.walhook.routing.Subscription;
import io.walhook.routing.TablePattern;

/**
 * The per-subscription delivery metrics as Prometheus scrapes them, through a composite registry as
 * Quarkus has: the counters there at zero from when a subscription comes into force, the latency
 * histogram from its first sample, counting what is reported,
 * a renamed subscription's counters going on under its new name, and a deleted one's all going.
 */
class MicrometerDeliveryMetricsTest {

    private final PrometheusMeterRegistry prometheus = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final MicrometerDeliveryMetrics metrics = new MicrometerDeliveryMetrics(new CompositeMeterRegistry().add(prometheus));

    private static Subscription named(String name) {
        return named(name, "7f1c");
    }

    private static Subscription named(String name, String id) {
        return new Subscription(name, List.of(TablePattern.parse("public.*")), EnumSet.allOf(Operation.class),
                Optional.empty(), new Destination.Webhook(URI.create("http://127.0.0.1:9/"), List.of(), Map.of()),
                EventFormat.JSON, 1, 0, Projection.ALL, true).withId(id);
    }

    private String series(String metric, String name) {
        return series(metric, name, "7f1c");
    }

    private String series(String metric, String name, String id) {
        String prefix = metric + "{subscription=\"" + name + "\",subscription_id=\"" + id + "\",} ";
        return prometheus.scrape().lines().filter(line -> line.startsWith(prefix)).map(line -> line.substring(prefix.length()))
                .findFirst().orElse("absent");
    }

    @Test
    void countersAreThereAtZeroFromWhenTheSubscriptionIsInForceTheHistogramFromItsFirstSample() {
        assertThat(series("walhook_delivery_routed_total", "orders")).isEqualTo("absent");
        metrics.inForce(named("orders"));
        metrics.inForce(named("orders"));
        assertThat(series("walhook_delivery_routed_total", "orders")).isEqualTo("0.0");
        assertThat(series("walhook_delivery_events_total", "orders")).isEqualTo("0.0");
        assertThat(series("walhook_delivery_retries_total", "orders")).isEqualTo("0.0");
        assertThat(series("walhook_delivery_parked_total", "orders")).isEqualTo("0.0");
        // made for every tenant in force, it was most of what the meters added to an idle subscription's memory
        assertThat(series("walhook_delivery_latency_seconds_count", "orders")).isEqualTo("absent");
        metrics.delivered(named("orders"), 1, Duration.ZERO);
        assertThat(series("walhook_delivery_events_total", "orders")).isEqualTo("1.0");
        assertThat(series("walhook_delivery_latency_seconds_count", "orders")).as("no commit time, no sample").isEqualTo("absent");
        metrics.delivered(named("orders"), 1, Duration.ofMillis(3));
        assertThat(series("walhook_delivery_latency_seconds_count", "orders")).isEqualTo("1.0");
    }

    /** A rename keeps the subscription's counters (they are its id's): begun at zero under the new name, they were not. */
    @Test
    void countsWhatIsReportedAndARenamedSubscriptionsCountersGoOnUnderItsNewName() {
        metrics.routed(named("orders"), 3);
        metrics.delivered(named("orders"), 2, Duration.ofMillis(7));
        metrics.retried(named("orders"));
        metrics.parked(named("orders"), 1);
        assertThat(series("walhook_delivery_routed_total", "orders")).isEqualTo("3.0");
        assertThat(series("walhook_delivery_events_total", "orders")).isEqualTo("2.0");
        assertThat(series("walhook_delivery_retries_total", "orders")).isEqualTo("1.0");
        assertThat(series("walhook_delivery_parked_total", "orders")).isEqualTo("1.0");
        assertThat(series("walhook_delivery_latency_seconds_count", "orders")).isEqualTo("1.0");

        metrics.inForce(named("sales")); // the rename in force
        metrics.routed(named("orders"), 1); // counted by a lane that has the old object still: under the new name
        assertThat(series("walhook_delivery_routed_total", "sales")).isEqualTo("4.0");
        assertThat(series("walhook_delivery_events_total", "sales")).isEqualTo("2.0");
        assertThat(series("walhook_delivery_retries_total", "sales")).isEqualTo("1.0");
        assertThat(series("walhook_delivery_parked_total", "sales")).isEqualTo("1.0");
        assertThat(series("walhook_delivery_latency_seconds_count", "sales")).as("the histogram begins anew").isEqualTo("absent");
        assertThat(prometheus.scrape()).as("no series under the old name").doesNotContain("subscription=\"orders\"");
        metrics.inForce(named("orders")); // the old name given back: the counts go on under it
        metrics.routed(named("orders"), 1);
        assertThat(series("walhook_delivery_routed_total", "orders")).isEqualTo("5.0");
        assertThat(series("walhook_delivery_events_total", "orders")).isEqualTo("2.0");
        assertThat(series("walhook_delivery_routed_total", "sales")).isEqualTo("absent");
    }

    @Test
    void aDeletedSubscriptionsSeriesLeaveTheScrapeUnderEveryNameItHad() {
        metrics.inForce(named("orders"));
        metrics.delivered(named("orders"), 2, Duration.ofMillis(7));
        metrics.inForce(named("sales")); // renamed: its counts go on under the new name
        metrics.routed(named("sales"), 1);
        metrics.inForce(named("billing", "9a2e"));
        metrics.routed(named("billing", "9a2e"), 5);
        metrics.onlyInForce(Set.of("7f1c", "9a2e"));
        assertThat(series("walhook_delivery_routed_total", "sales")).isEqualTo("1.0");
        assertThat(series("walhook_delivery_events_total", "sales")).isEqualTo("2.0");

        metrics.onlyInForce(Set.of("9a2e")); // 7f1c deleted
        assertThat(prometheus.scrape()).doesNotContain("subscription_id=\"7f1c\"");
        assertThat(series("walhook_delivery_routed_total", "billing", "9a2e")).isEqualTo("5.0");
        assertThat(series("walhook_delivery_events_total", "billing", "9a2e")).isEqualTo("0.0");

        // an event routed to it as it went (the routing thread had it in hand) makes its meters again:
        // the next change of the subscriptions in force takes them away
        metrics.routed(named("sales"), 1);
        assertThat(series("walhook_delivery_routed_total", "sales")).isEqualTo("1.0");
        metrics.onlyInForce(Set.of("9a2e"));
        assertThat(prometheus.scrape()).doesNotContain("subscription_id=\"7f1c\"");
        // the same id in force again (a restore): its counters start again at zero
        metrics.inForce(named("sales"));
        assertThat(series("walhook_delivery_routed_total", "sales")).isEqualTo("0.0");
    }
}
