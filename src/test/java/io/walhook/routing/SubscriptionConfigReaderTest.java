package io.walhook.routing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import io.walhook.change.Operation;
import io.walhook.config.ConfigException;
import io.walhook.config.WalhookConfig;

class SubscriptionConfigReaderTest {

    private static WalhookConfig.SubscriptionConfig config(Map<String, String> values) {
        return TestSubscriptions.config(values);
    }

    @Test
    void readsEveryFieldOfAConfiguredSubscription() {
        Subscription s = SubscriptionConfigReader.read("orders", config(Map.of("URL", "https://example.com/hook",
                "TABLES", "public.orders, sales.*", "OPERATIONS", "insert,update", "FILTER", "new.amount > 100",
                "SECRET", "whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE=", "FORMAT", "cloudevents",
                "BATCH_MAX_EVENTS", "50", "EXCLUDE_COLUMNS", "notes")), false);
        assertThat(s.name()).isEqualTo("orders");
        assertThat(s.tables()).extracting(TablePattern::text).containsExactly("public.orders", "sales.*");
        assertThat(s.operations()).containsExactlyInAnyOrder(Operation.INSERT, Operation.UPDATE);
        assertThat(s.filter()).isPresent();
        assertThat(s.format()).isEqualTo(EventFormat.CLOUDEVENTS);
        assertThat(s.batchMaxEvents()).isEqualTo(50);
        assertThat(s.projection().keeps("notes")).isFalse();
        assertThat(((Destination.Webhook) s.destination()).secrets()).hasSize(1);
        assertThat(s.readOnly()).isTrue();
        assertThat(s.destination().toString()).doesNotContain("whsec");
    }

    @Test
    void defaultsToEveryTableAndOperationAsJson() {
        Subscription s = SubscriptionConfigReader.read("all", config(Map.of("URL", "http://sink/")), false);
        assertThat(s.tables()).containsExactly(TablePattern.ALL);
        assertThat(s.operations()).containsExactlyInAnyOrderElementsOf(Operation.SUBSCRIBABLE);
        assertThat(s.format()).isEqualTo(EventFormat.JSON);
        assertThat(s.batchMaxEvents()).isEqualTo(1);
    }

    /**
     * A destination's host name holding '_' (RFC 3986 allows it; Docker Compose's service names have
     * it) is a host, though java.net.URI reads such an authority as none: it was refused.
     */
    @Test
    void aHostNameHoldingAnUnderscoreIsAHost() {
        Subscription s = SubscriptionConfigReader.read("compose", config(Map.of("URL", "http://webhook_receiver:8080/hook")),
                false);
        Destination.Webhook webhook = (Destination.Webhook) s.destination();
        assertThat(io.walhook.config.UrlAuthority.host(webhook.url())).isEqualTo("webhook_receiver");
        assertThat(io.walhook.config.UrlAuthority.port(webhook.url())).isEqualTo(8080);
        assertThat(webhook.loggedUrl()).startsWith("http://webhook_receiver:8080/");
        assertThat(io.walhook.config.UrlAuthority.host(SubscriptionConfigReader.writtenUrl("X", "http://hooks_v2.example.com/h")))
                .isEqualTo("hooks_v2.example.com");
        // Java's TLS cannot check a certificate against such a name: every request would fail
        assertThatThrownBy(() -> SubscriptionConfigReader.writtenUrl("X", "https://hooks_v2.example.com/h?k=Zq9xW"))
                .hasMessageContaining("hooks_v2.example.com").hasMessageContaining("'_'").hasMessageNotContaining("Zq9xW");
    }

    @Test
    void anEmptyKnativeSinkIsRefusedNotSkipped() {
        assertThatThrownBy(() -> SubscriptionConfigReader.knativeSink(Map.of("K_SINK", " ")))
                .isInstanceOf(ConfigException.class).hasMessageStartingWith("K_SINK is set but empty");
        assertThat(SubscriptionConfigReader.knativeSink(Map.of())).isEmpty();
        assertThat(SubscriptionConfigReader.knativeSink(Map.of("K_SINK", "http://sink.default.svc/")))
                .hasValueSatisfying(s -> assertThat(s.name()).isEqualTo(SubscriptionConfigReader.KNATIVE_SINK));
    }

    @Test
    void batchingAnAmqpSubscriptionIsRefusedNotIgnored() {
        assertThatThrownBy(() -> SubscriptionConfigReader.read("demo", config(Map.of("AMQP_ADDRESS", "orders",
                "BATCH_MAX_EVENTS", "10")), true))
                .isInstanceOf(ConfigException.class)
                .hasMessageStartingWith("WALHOOK_SUBSCRIPTIONS_DEMO_BATCH_MAX_EVENTS is 10, but each event is one AMQP message");
        assertThat(SubscriptionConfigReader.read("demo", config(Map.of("AMQP_ADDRESS", "orders", "BATCH_MAX_EVENTS", "1")),
                true).batchMaxEvents()).isEqualTo(1);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "URL=ftp://x/                      | WALHOOK_SUBSCRIPTIONS_DEMO_URL must be an http:// or https:// URL",
        "TABLES=orders                     | WALHOOK_SUBSCRIPTIONS_DEMO_TABLES has 'orders' is not a schema.table",
        "OPERATIONS=insert,upsert          | WALHOOK_SUBSCRIPTIONS_DEMO_OPERATIONS has 'upsert', not an operation",
        "TABLES=,                          | WALHOOK_SUBSCRIPTIONS_DEMO_TABLES lists no table",
        "OPERATIONS= , ,                   | WALHOOK_SUBSCRIPTIONS_DEMO_OPERATIONS lists no operation",
        "FORMAT=xml                        | WALHOOK_SUBSCRIPTIONS_DEMO_FORMAT has 'xml' is not a format",
        "FILTER=new.amount >               | WALHOOK_SUBSCRIPTIONS_DEMO_FILTER is not a valid filter",
        "FILTER=op == 1                    | WALHOOK_SUBSCRIPTIONS_DEMO_FILTER is not a valid filter",
        "SECRET=mysecret                   | WALHOOK_SUBSCRIPTIONS_DEMO_SECRET secret 1 does not start with whsec_",
        "SECRET=whsec_!!!                  | WALHOOK_SUBSCRIPTIONS_DEMO_SECRET secret 1 is not base64 after whsec_: its character 1 is not",
        "SECRET=whsec_MfKQ9r8GKYq~TwjUPD8ILPZIo2LaLaSw | WALHOOK_SUBSCRIPTIONS_DEMO_SECRET secret 1 is not base64 after whsec_: its character 12 is not one of base64's (A-Z, a-z, 0-9, + and /, = to pad)",
        "SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo | WALHOOK_SUBSCRIPTIONS_DEMO_SECRET secret 1 is not base64 after whsec_: its length or padding",
        // the example the Standard Webhooks specification prints (docs everywhere copy it): anyone can sign with it
        "SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw | WALHOOK_SUBSCRIPTIONS_DEMO_SECRET secret 1 is the example the Standard Webhooks specification prints",
        "SECRET=whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE= whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw | WALHOOK_SUBSCRIPTIONS_DEMO_SECRET secret 2 is the example",
        "BATCH_MAX_EVENTS=0                | WALHOOK_SUBSCRIPTIONS_DEMO_BATCH_MAX_EVENTS is 0; it must be between 1 and 10000",
        "BATCH_MAX_EVENTS=many             | WALHOOK_SUBSCRIPTIONS_DEMO_BATCH_MAX_EVENTS is 'many', not a whole number",
        "AMQP_ADDRESS=orders               | WALHOOK_SUBSCRIPTIONS_DEMO_URL and WALHOOK_SUBSCRIPTIONS_DEMO_AMQP_ADDRESS are both set",
        "FORMAT=cloudevents-binary;BATCH_MAX_EVENTS=10 | WALHOOK_SUBSCRIPTIONS_DEMO_BATCH_MAX_EVENTS is 10, but binary CloudEvents carry one event",
        "RETRY_MAX_ATTEMPTS=0              | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_MAX_ATTEMPTS is 0; it must be between 1 and 1000",
        "RETRY_MAX_ATTEMPTS=1001           | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_MAX_ATTEMPTS is 1001; it must be between 1 and 1000",
        "RETRY_MAX_ATTEMPTS=three          | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_MAX_ATTEMPTS is 'three', not a whole number",
        "RETRY_MAX_BACKOFF=soon            | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_MAX_BACKOFF is 'soon', not a duration",
        "RETRY_MAX_BACKOFF=0s              | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_MAX_BACKOFF is 0s; it must be longer than zero",
        "RETRY_MAX_BACKOFF=2d              | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_MAX_BACKOFF is 2d; it must be at most 24h",
        "RETRY_WINDOW=PT-5M                | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_WINDOW is PT-5M; it must be longer than zero",
        "RETRY_WINDOW=8d                   | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_WINDOW is 8d; it must be at most 7d",
        "RETRY_MAX_BACKOFF=60000           | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_MAX_BACKOFF is 60000 without a unit",
        "RETRY_WINDOW=5 minutes            | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_WINDOW is '5 minutes', not a duration",
        "RETRY_MAX_BACKOFF=2m;RETRY_WINDOW=1m | WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_MAX_BACKOFF is 2m, longer than WALHOOK_SUBSCRIPTIONS_DEMO_RETRY_WINDOW (1m)",
        "MAX_IN_FLIGHT=0                   | WALHOOK_SUBSCRIPTIONS_DEMO_MAX_IN_FLIGHT is 0; it must be from 1 to 64 for a webhook (100 for AMQP)",
        "MAX_IN_FLIGHT=65                  | WALHOOK_SUBSCRIPTIONS_DEMO_MAX_IN_FLIGHT is 65; it must be from 1 to 64 for a webhook (100 for AMQP)",
        "RATE_LIMIT=99999999999/s          | WALHOOK_SUBSCRIPTIONS_DEMO_RATE_LIMIT allows 99999999999 requests per second; use 1 to 100000",
        "MAX_IN_FLIGHT=lots                | WALHOOK_SUBSCRIPTIONS_DEMO_MAX_IN_FLIGHT is 'lots', not a whole number",
        "RATE_LIMIT=fast                   | WALHOOK_SUBSCRIPTIONS_DEMO_RATE_LIMIT is not a rate: write requests per period, as in 50/s or 600/min",
        "RATE_LIMIT=50/h                   | WALHOOK_SUBSCRIPTIONS_DEMO_RATE_LIMIT has 'h' as its period; use s (per second) or min (per minute)",
        "RATE_LIMIT=0/s                    | WALHOOK_SUBSCRIPTIONS_DEMO_RATE_LIMIT allows 0 requests per second; use 1 to 100000",
        "RATE_LIMIT=100001                 | WALHOOK_SUBSCRIPTIONS_DEMO_RATE_LIMIT allows 100001 requests per second; use 1 to 100000",
        "INCLUDE_COLUMNS=,                 | WALHOOK_SUBSCRIPTIONS_DEMO_INCLUDE_COLUMNS lists no column",
        "EXCLUDE_COLUMNS= , ,              | WALHOOK_SUBSCRIPTIONS_DEMO_EXCLUDE_COLUMNS lists no column",
    })
    void badValueNamesItsVariable(String field, String problem) {
        refusedNaming(assigned(Map.of("URL", "http://sink/"), field), false, problem);
    }

    /** {@code base} with the {@code NAME=value;NAME=value} of a test row. */
    private static Map<String, String> assigned(Map<String, String> base, String field) {
        Map<String, String> values = new HashMap<>(base);
        for (String assignment : field.split(";")) {
            String[] kv = assignment.split("=", 2);
            values.put(kv[0], kv[1]);
        }
        return values;
    }

    /** Reading the values fails, with the variable first and then {@code problem}'s words after it, on one line. */
    private static void refusedNaming(Map<String, String> values, boolean amqp, String problem) {
        assertThatThrownBy(() -> SubscriptionConfigReader.read("demo", config(values), amqp))
                .isInstanceOf(ConfigException.class)
                .hasMessageStartingWith(problem.split(" ")[0])
                .hasMessageContaining(problem.substring(problem.indexOf(' ') + 1))
                .satisfies(e -> assertThat(e.getMessage()).doesNotContain("\n"));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "AMQP_ADDRESS=cdc.{tabel}          | WALHOOK_SUBSCRIPTIONS_DEMO_AMQP_ADDRESS has {tabel}, which is not replaced",
        "AMQP_ADDRESS=q;SECRET=whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE= | WALHOOK_SUBSCRIPTIONS_DEMO_SECRET is set, but an AMQP destination's messages are not signed",
        "AMQP_ADDRESS=q;BATCH_MAX_WAIT_MS=500 | WALHOOK_SUBSCRIPTIONS_DEMO_BATCH_MAX_WAIT_MS is 500, but each event is one AMQP message, sent at once",
    })
    void aBadValueOfAnAmqpSubscriptionNamesItsVariable(String field, String problem) {
        Map<String, String> values = assigned(Map.of(), field);
        refusedNaming(values, true, problem);
        values.remove("SECRET");
        values.remove("BATCH_MAX_WAIT_MS");
        values.put("AMQP_ADDRESS", "cdc.{schema}.{table}.{op}");
        assertThat(SubscriptionConfigReader.read("demo", config(values), true).destination())
                .isEqualTo(new Destination.Amqp("cdc.{schema}.{table}.{op}"));
    }

    /**
     * A URL that is refused is not repeated: its query string and user info can be credentials,
     * and the message goes to the start-up log and to API answers.
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "http://my*svc:8080/hook?token=Zq9xW      | has 'my*svc' where a host[:port] belongs",
        "http://my_svc:2024/Zq9xW@receiver/hook   | cut short by a '/', '?' or '#'",
        "http://hooks_v2:99999/h?k=Zq9xW          | has a port outside 1 to 65535",
        "ftp://user:Zq9xW@files/                  | must be an http:// or https:// URL, not ftp://",
        "Zq9xW:x@acme.freshdesk.com/api           | must be an http:// or https:// URL, not a URL without a scheme",
        "https//hooks.example.com/h?token=Zq9xW   | must be an http:// or https:// URL, not a URL without a scheme",
        "http://user:Zq9/xW@hooks.example.com/    | has '@' in its path followed by what looks like a host",
        "http://user:2024/Zq9xW@hooks.example.com/ | has '@' in its path followed by what looks like a host",
        "http://Zq9/xW@hooks.example.com/h        | has '@' in its path followed by what looks like a host",
        "http://svc:2024/Zq9xW@receiver/hook      | has '@' in its path followed by what looks like a host",
        "https://sk_live_Zq9xW:x/y@receiver/h     | cut short by a '/', '?' or '#'",
        "https://sk_live_Zq9xW/y@receiver/h       | cut short by a '/', '?' or '#'",
        "https://Zq9/xW/y@localhost:8443/h        | has '@' in its path followed by what looks like a host",
        "http://john.doe:2024/Zq9xW@127.0.0.1:18190/ok | a password's digits",
        "http://john.doe:2024/Zq9xW@hooks.example.com:443/ok | a password's digits",
        "http://receiver.ns:2024/Zq9xW@10.0.0.7/ok | a password's digits",
        "http://127.0.0.2:18191?Zq9xW@127.0.0.1:18190/ok | a password's digits",
        "http://admin.corp:2024#Zq9xW@hooks.example.com/ok | a password's digits",
        "http://john.doe:2024/Zq9?xW@10.0.0.7:8080/ | a password's digits",
        "http://john.doe:2024/Zq9/xW@10.0.0.7:8080/ | a password's digits",
        "http://john.doe:2024/Zq9@xW@10.0.0.7:8080/ | a password's digits",
        "http://john.doe:2024/@10.0.0.7:8080/Zq9xW | a password's digits",
        "https://me@corp.com:Zq9?xW@hooks.example.com/x | cut short by a '/', '?' or '#'",
        "https://me@corp.com:Zq9#xW@hooks.example.com/x | cut short by a '/', '?' or '#'",
        "https:///h?token=Zq9xW                   | names no host",
        "http://hooks.example.com:0/h?token=Zq9xW | has a port outside 1 to 65535",
        "http://hooks.example.com:99999/h?k=Zq9xW | has a port outside 1 to 65535",
        // a password's digits read as a port out of range, the rest of it in the path: the port is not shown
        "http://svc:209998/Zq9xW/b@receiver/hook  | has a port outside 1 to 65535, or a password holding",
        "http://svc:209998?Zq9xW@receiver/hook    | has a port outside 1 to 65535, or a password holding",
        "http://svc:209998#Zq9xW@receiver/hook    | has a port outside 1 to 65535, or a password holding",
    })
    void aRefusedUrlIsNotRepeated(String url, String problem) {
        assertThatThrownBy(() -> SubscriptionConfigReader.read("demo", config(Map.of("URL", url)), false))
                .isInstanceOf(ConfigException.class)
                .hasMessageStartingWith("WALHOOK_SUBSCRIPTIONS_DEMO_URL ").hasMessageContaining(problem)
                .hasMessageNotContaining("Zq9").hasMessageNotContaining("xW").hasMessageNotContaining("209998");
    }

    /**
     * A stored destination an earlier walhook accepted is read as before (refusing it would hold its
     * subscription), and a path's own '@' is taken.
     */
    @Test
    void aStoredUrlWithAtInItsPathIsStillReadAndAPathsAtIsTaken() {
        assertThat(SubscriptionConfigReader.url("url", "http://user:2024/Zq9xW@hooks.example.com/").getHost())
                .isEqualTo("user");
        assertThat(SubscriptionConfigReader.writtenUrl("url", "https://api.example.com/users/a@b.com/notify").getPath())
                .as("an '@' past the path's first segment").isEqualTo("/users/a@b.com/notify");
        assertThat(SubscriptionConfigReader.writtenUrl("url", "https://social.example.com/@me").getPath())
                .as("an '@' opening the first segment").isEqualTo("/@me");
        assertThat(SubscriptionConfigReader.writtenUrl("url", "https://hooks.example.com/alerts@team/h").getPath())
                .as("under a host with a dot").isEqualTo("/alerts@team/h");
        assertThat(SubscriptionConfigReader.writtenUrl("url", "http://sink/alerts@team/h").getPath())
                .as("followed by no host").isEqualTo("/alerts@team/h");
        assertThat(SubscriptionConfigReader.writtenUrl("url", "https://hooks.example.com:8443/ops@example.com").getPath())
                .as("a port, then an address with no port of its own").isEqualTo("/ops@example.com");
        assertThat(SubscriptionConfigReader.writtenUrl("url", "http://receiver:8080/notify?ops@example.com").getQuery())
                .as("a query after a path").isEqualTo("ops@example.com");
        assertThat(SubscriptionConfigReader.writtenUrl("url", "https://hooks.example.com:8443?to=ops@example.com").getQuery())
                .as("a query's value").isEqualTo("to=ops@example.com");
        assertThat(SubscriptionConfigReader.writtenUrl("url", "https://h.example.com:8443/?ops@example.com&token=x").getQuery())
                .as("a query's address and its next pair").isEqualTo("ops@example.com&token=x");
        assertThat(SubscriptionConfigReader.writtenUrl("url", "https://h.example.com:8443/?tag@prod&v=1.2").getQuery())
                .as("a query's word and its next pair").isEqualTo("tag@prod&v=1.2");
        assertThat(SubscriptionConfigReader.writtenUrl("url", "https://app.example.com:8443/#/hook@x.y").getFragment())
                .as("a fragment's path").isEqualTo("/hook@x.y");
    }

    @Test
    void aUrlsSchemeIsReadWhateverItsCase() {
        Subscription s = SubscriptionConfigReader.read("demo", config(Map.of("URL", "HTTPS://hooks.example.com/h?k=1")),
                false);
        assertThat(((Destination.Webhook) s.destination()).url().toString()).isEqualTo("https://hooks.example.com/h?k=1");
    }

    @Test
    void deliveryLimitsAreReadWhereSet() {
        Subscription s = SubscriptionConfigReader.read("tenant", config(Map.of("URL", "http://sink/",
                "MAX_IN_FLIGHT", "2", "RATE_LIMIT", "600/min")), false);
        assertThat(s.limits()).isEqualTo(new DeliveryLimits(Optional.of(2),
                Optional.of(new DeliveryLimits.Rate(600, DeliveryLimits.Period.MINUTE))));
        assertThat(SubscriptionConfigReader.read("t", config(Map.of("URL", "http://sink/", "RATE_LIMIT", " 50 / s ")),
                false).limits().rate()).contains(new DeliveryLimits.Rate(50, DeliveryLimits.Period.SECOND));
        assertThat(SubscriptionConfigReader.read("t", config(Map.of("URL", "http://sink/", "RATE_LIMIT", "20")),
                false).limits().rate().get().toString()).isEqualTo("20/s");
        assertThat(SubscriptionConfigReader.read("plain", config(Map.of("URL", "http://sink/", "MAX_IN_FLIGHT", " ")),
                false).limits()).isEqualTo(DeliveryLimits.NONE);
    }

    @Test
    void retrySettingsOverrideTheGlobalOnesOnlyWhereSet() {
        Subscription s = SubscriptionConfigReader.read("flaky", config(Map.of("URL", "http://sink/",
                "RETRY_MAX_ATTEMPTS", "2", "RETRY_MAX_BACKOFF", "500ms", "RETRY_WINDOW", "PT10M")), false);
        assertThat(s.retry()).isEqualTo(new RetryPolicy(Optional.of(2), Optional.of(java.time.Duration.ofMillis(500)),
                Optional.of(java.time.Duration.ofMinutes(10))));
        Subscription windowOnly = SubscriptionConfigReader.read("slow", config(Map.of("URL", "http://sink/",
                "RETRY_WINDOW", "30s")), false);
        assertThat(windowOnly.retry().window()).contains(java.time.Duration.ofSeconds(30));
        assertThat(windowOnly.retry().maxAttempts()).isEmpty();
        assertThat(windowOnly.retry().maxBackoff()).isEmpty();
        // a backoff longer than the global window is allowed: only a subscription's own pair is compared
        assertThat(SubscriptionConfigReader.read("wait", config(Map.of("URL", "http://sink/", "RETRY_MAX_BACKOFF", "1h",
                "RETRY_MAX_ATTEMPTS", " ")), false).retry())
                .isEqualTo(new RetryPolicy(Optional.empty(), Optional.of(java.time.Duration.ofHours(1)), Optional.empty()));
        assertThat(SubscriptionConfigReader.read("plain", config(Map.of("URL", "http://sink/")), false).retry())
                .isEqualTo(RetryPolicy.DEFAULTS);
    }

    @Test
    void aSubscriptionNeedsADestinationAndAmqpNeedsABroker() {
        assertThatThrownBy(() -> SubscriptionConfigReader.read("demo", config(Map.of()), false))
                .hasMessageStartingWith("WALHOOK_SUBSCRIPTIONS_DEMO_URL (or WALHOOK_SUBSCRIPTIONS_DEMO_AMQP_ADDRESS) is required");
        assertThatThrownBy(() -> SubscriptionConfigReader.read("demo", config(Map.of("AMQP_ADDRESS", "q")), false))
                .hasMessage("WALHOOK_SUBSCRIPTIONS_DEMO_AMQP_ADDRESS needs a broker: set WALHOOK_AMQP_URL");
    }

    @Test
    void knativeSinkBecomesACloudEventsSubscriptionWithOverrides() {
        Map<String, String> extensions = SubscriptionConfigReader.cloudEventsOverrides(
                "{\"extensions\": {\"team\": \"shop\", \"tier\": 2}}");
        assertThat(extensions).containsEntry("team", "shop").containsEntry("tier", "2");
        assertThatThrownBy(() -> SubscriptionConfigReader.cloudEventsOverrides("{\"extensions\": {\"Bad_Name\": 1}}"))
                .hasMessageStartingWith("K_CE_OVERRIDES has extension 'Bad_Name'");
        assertThatThrownBy(() -> SubscriptionConfigReader.cloudEventsOverrides("{nope"))
                .hasMessageStartingWith("K_CE_OVERRIDES is not JSON");
    }

    /**
     * An extension named as a context attribute of the event replaced it: {"id": "x"} gave every
     * event the same id (receivers that drop duplicates dropped all but the first), {"data": ...}
     * wrote a second data member.
     */
    @ParameterizedTest
    @ValueSource(strings = {"id", "source", "type", "subject", "time", "specversion", "datacontenttype", "dataschema",
        "data"})
    void aCloudEventsOverrideCannotReplaceAnAttributeOfTheEvent(String name) {
        assertThatThrownBy(() -> SubscriptionConfigReader.cloudEventsOverrides("{\"extensions\": {\"" + name + "\": \"x\"}}"))
                .hasMessageStartingWith("K_CE_OVERRIDES has extension '" + name + "'")
                .hasMessageContaining("attribute of its own");
    }
}
