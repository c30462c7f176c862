package io.walhook.routing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import com.fasterxml.jackson.databind.ObjectMapper;

class SubscriptionJsonTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void readsTheApiSubscriptionObject() throws Exception {
        Subscription s = SubscriptionJson.parse(JSON.readTree("{\"name\": \"orders\", \"tables\": [\"public.orders\"],"
                + " \"operations\": [\"insert\"], \"filter\": \"new.amount > 1\", \"format\": \"cloudevents\","
                + " \"destination\": {\"type\": \"webhook\", \"url\": \"https://example.com\", \"headers\": {\"X-Team\": \"a\"}},"
                + " \"batch\": {\"max_events\": 10, \"max_wait_ms\": 500}, \"columns\": {\"include\": [\"id\"]}}"));
        assertThat(s.name()).isEqualTo("orders");
        assertThat(s.format()).isEqualTo(EventFormat.CLOUDEVENTS);
        assertThat(s.batchMaxEvents()).isEqualTo(10);
        assertThat(s.batchMaxWaitMs()).isEqualTo(500);
        assertThat(s.projection().keeps("id")).isTrue();
        assertThat(s.projection().keeps("notes")).isFalse();
        assertThat(((Destination.Webhook) s.destination()).headers()).containsEntry("X-Team", "a");
        assertThat(s.readOnly()).isFalse();
        assertThat(s.retry()).isEqualTo(RetryPolicy.DEFAULTS);
    }

    @Test
    void readsTheRetryPolicyEachFieldOptional() throws Exception {
        String destination = "\"destination\": {\"type\": \"webhook\", \"url\": \"https://example.com\"}";
        Subscription all = SubscriptionJson.parse(JSON.readTree("{\"name\": \"a\", " + destination
                + ", \"retry\": {\"max_attempts\": 5, \"max_backoff_ms\": 2000, \"window_ms\": 60000}}"));
        assertThat(all.retry()).isEqualTo(new RetryPolicy(java.util.Optional.of(5),
                java.util.Optional.of(java.time.Duration.ofSeconds(2)), java.util.Optional.of(java.time.Duration.ofMinutes(1))));
        Subscription attemptsOnly = SubscriptionJson.parse(JSON.readTree("{\"name\": \"a\", " + destination
                + ", \"retry\": {\"max_attempts\": 1, \"window_ms\": null}}"));
        assertThat(attemptsOnly.retry()).isEqualTo(new RetryPolicy(java.util.Optional.of(1), java.util.Optional.empty(),
                java.util.Optional.empty()));
        assertThat(SubscriptionJson.parse(JSON.readTree("{\"name\": \"a\", " + destination + ", \"retry\": {}}")).retry())
                .isEqualTo(RetryPolicy.DEFAULTS);
        assertThat(SubscriptionJson.parse(JSON.readTree("{\"name\": \"a\", " + destination + ", \"retry\": null}")).retry())
                .isEqualTo(RetryPolicy.DEFAULTS);
        // the backoff may equal the window
        assertThat(SubscriptionJson.parse(JSON.readTree("{\"name\": \"a\", " + destination
                + ", \"retry\": {\"max_backoff_ms\": 1000, \"window_ms\": 1000}}")).retry().maxBackoff())
                .contains(java.time.Duration.ofSeconds(1));
    }

    @Test
    void readsDeliveryLimitsEachOptional() throws Exception {
        String webhook = "\"destination\": {\"type\": \"webhook\", \"url\": \"https://example.com\"}";
        Subscription both = SubscriptionJson.parse(JSON.readTree("{\"name\": \"a\", " + webhook
                + ", \"max_in_flight\": 1, \"rate_limit\": {\"requests\": 600, \"per\": \"minute\"}}"));
        assertThat(both.limits().maxInFlight()).contains(1);
        assertThat(both.limits().rate()).contains(new DeliveryLimits.Rate(600, DeliveryLimits.Period.MINUTE));
        assertThat(both.limits().rate().get().spacingNanos()).isEqualTo(100_000_000L);
        // rounded up: 7 a second never fit 8 starts in one second
        assertThat(new DeliveryLimits.Rate(7, DeliveryLimits.Period.SECOND).spacingNanos() * 7).isGreaterThanOrEqualTo(1_000_000_000L);
        Subscription perSecond = SubscriptionJson.parse(JSON.readTree("{\"name\": \"a\", " + webhook
                + ", \"rate_limit\": {\"requests\": 50}}"));
        assertThat(perSecond.limits()).isEqualTo(new DeliveryLimits(java.util.Optional.empty(),
                java.util.Optional.of(new DeliveryLimits.Rate(50, DeliveryLimits.Period.SECOND))));
        assertThat(SubscriptionJson.parse(JSON.readTree("{\"name\": \"a\", " + webhook
                + ", \"max_in_flight\": null, \"rate_limit\": null}")).limits()).isEqualTo(DeliveryLimits.NONE);
        // AMQP allows up to its window of 100 messages under way
        assertThat(SubscriptionJson.parse(JSON.readTree("{\"name\": \"a\", \"max_in_flight\": 100,"
                + " \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}}")).limits().maxInFlight()).contains(100);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "[]                                                                          | ''",
        "{\"destination\": {\"type\": \"webhook\", \"url\": \"http://x\"}}          | /name",
        "{\"name\": \"a\", \"extra\": 1, \"destination\": {}}                        | /extra",
        "{\"name\": \"A B\", \"destination\": {}}                                    | /name",
        "{\"name\": \"a\"}                                                            | /destination",
        "{\"name\": \"a\", \"destination\": {\"type\": \"ftp\"}}                     | /destination/type",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"file:/etc\"}} | /destination/url",
        "{\"name\": \"a\", \"tables\": \"public.x\", \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /tables",
        "{\"name\": \"a\", \"tables\": [1], \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /tables/0",
        "{\"name\": \"a\", \"operations\": [\"merge\"], \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /operations",
        "{\"name\": \"a\", \"operations\": [\"insert,delete\"], \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /operations/0",
        "{\"name\": \"a\", \"operations\": [\"insert\", \" update\"], \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /operations/1",
        "{\"name\": \"a\", \"tables\": [\"public.x\", \"bad\"], \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /tables/1",
        "{\"name\": \"a\", \"filter\": \"op ==\", \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /filter",
        "{\"name\": \"a\", \"batch\": {\"max_events\": 0}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /batch/max_events",
        "{\"name\": \"a\", \"batch\": {\"max_events\": 1.5}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /batch/max_events",
        "{\"name\": \"a\", \"format\": \"cloudevents-binary\", \"batch\": {\"max_events\": 5}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /batch/max_events",
        "{\"name\": \"a\", \"batch\": {\"max_events\": 5}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /batch/max_events",
        "{\"name\": \"a\", \"batch\": {\"max_wait_ms\": 5000}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /batch/max_wait_ms",
        "{\"name\": \"a\", \"destination\": {\"type\": \"amqp\", \"address\": \"q\", \"url\": \"http://x\"}} | /destination/url",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"headers\": {\"a b\": \"c\"}}} | /destination/headers",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"headers\": {\"webhook-id\": \"mine\"}}} | /destination/headers/webhook-id",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"headers\": {\"Webhook-Signature\": \"v1,x\"}}} | /destination/headers/Webhook-Signature",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"headers\": {\"Content-Type\": \"text/plain\"}}} | /destination/headers/Content-Type",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"headers\": {\"ce-source\": \"/me\"}}} | /destination/headers/ce-source",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"headers\": {\"Host\": \"other\"}}} | /destination/headers/Host",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"headers\": {\"X-Key\": \"a\", \"x-key\": \"b\"}}} | /destination/headers/x-key",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"headers\": {\"X~1\": \"a\", \"x~1\": \"b\"}}} | /destination/headers/x~01",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"headers\": {\"X-Key\": \"t\u00f6k\u20acn\"}}} | /destination/headers/X-Key",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x:0/h\"}} | /destination/url",
        "{\"name\": \"a\", \"operations\": [], \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\"}} | /operations",
        "{\"name\": \"a\", \"columns\": {\"include\": []}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /columns/include",
        "{\"name\": \"a\", \"columns\": {\"include\": [\"\"]}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /columns/include",
        "{\"name\": \"a\", \"columns\": {\"exclude\": [\"id\", \" \"]}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /columns/exclude",
        // names are matched exactly: these left no column out
        "{\"name\": \"a\", \"columns\": {\"exclude\": [\"ssn \"]}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /columns/exclude/0",
        "{\"name\": \"a\", \"columns\": {\"exclude\": [\"id\", \"notes,ssn\"]}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /columns/exclude/1",
        "{\"name\": \"a\", \"columns\": {\"include\": [\" id\"]}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /columns/include/0",
        // read as no secret: unsigned webhooks
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"secret\": \"\"}} | /destination/secret",
        "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"secret\": \"  \"}} | /destination/secret",
        "{\"name\": \"a\", \"destination\": {\"type\": \"amqp\", \"address\": \"cdc.{tabel}\"}} | /destination/address",
        "{\"name\": \"a\", \"operations\": [\" \"], \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\"}} | /operations",
        "{\"name\": \"a\", \"filter\": \"  \", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\"}} | /filter",
        "{\"name\": \"a\", \"batch\": {\"max_event\": 50}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /batch/max_event",
        "{\"name\": \"a\", \"columns\": {\"only\": [\"id\"]}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /columns/only",
        "{\"name\": \"a\", \"tables\": [], \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /tables",
        "{\"name\": \"a\", \"retry\": 3, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry",
        "{\"name\": \"a\", \"retry\": {\"attempts\": 3}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry/attempts",
        "{\"name\": \"a\", \"retry\": {\"max_attempts\": 0}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry/max_attempts",
        "{\"name\": \"a\", \"retry\": {\"max_attempts\": 1001}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry/max_attempts",
        "{\"name\": \"a\", \"retry\": {\"max_attempts\": \"2\"}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry/max_attempts",
        "{\"name\": \"a\", \"retry\": {\"max_backoff_ms\": 0}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry/max_backoff_ms",
        "{\"name\": \"a\", \"retry\": {\"max_backoff_ms\": 86400001}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry/max_backoff_ms",
        "{\"name\": \"a\", \"retry\": {\"window_ms\": -1}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry/window_ms",
        "{\"name\": \"a\", \"retry\": {\"window_ms\": 1.5}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry/window_ms",
        "{\"name\": \"a\", \"retry\": {\"window_ms\": 604800001}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry/window_ms",
        "{\"name\": \"a\", \"retry\": {\"max_backoff_ms\": 60000, \"window_ms\": 1000}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /retry/max_backoff_ms",
        "{\"name\": \"a\", \"max_in_flight\": 0, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /max_in_flight",
        "{\"name\": \"a\", \"max_in_flight\": 101, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /max_in_flight",
        "{\"name\": \"a\", \"max_in_flight\": 65, \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\"}} | /max_in_flight",
        "{\"name\": \"a\", \"max_in_flight\": \"4\", \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /max_in_flight",
        "{\"name\": \"a\", \"rate_limit\": 50, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /rate_limit",
        "{\"name\": \"a\", \"rate_limit\": {}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /rate_limit/requests",
        "{\"name\": \"a\", \"rate_limit\": {\"requests\": 0}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /rate_limit/requests",
        "{\"name\": \"a\", \"rate_limit\": {\"requests\": 100001}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /rate_limit/requests",
        "{\"name\": \"a\", \"rate_limit\": {\"requests\": 5, \"per\": \"hour\"}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /rate_limit/per",
        "{\"name\": \"a\", \"rate_limit\": {\"requests\": 5, \"per\": \"s\"}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /rate_limit/per",
        "{\"name\": \"a\", \"rate_limit\": {\"requests\": 5, \"burst\": 2}, \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}} | /rate_limit/burst",
    })
    void namesTheFieldAtFault(String body, String field) throws Exception {
        assertThatThrownBy(() -> SubscriptionJson.parse(JSON.readTree(body)))
                .isInstanceOf(SubscriptionException.class)
                .satisfies(e -> assertThat(((SubscriptionException) e).field()).isEqualTo(field));
    }

    /**
     * What an earlier walhook accepted and stored is still read (held out of force, its changes
     * would not be routed): the checks added since apply to what is written now.
     */
    @ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {
        "{\"X-Key\": \"t\u00f6ken\", \"x-key\": \"b\"} | [\"insert\"]                   | http://x/h",
        "{\"X-Key\": \"LONG\"}                            | [\"insert\"]                   | http://x/h",
        "{}                                              | [\"insert\"], \"filter\": \" \" | http://x/h",
        "{}                                              | []                             | http://x/h",
        "{}                                              | [\"insert\"]                   | http://x:0/h",
    })
    void aStoredSubscriptionIsReadAsAnEarlierWalhookAcceptedIt(String stored) throws Exception {
        String[] parts = stored.split("\\|");
        String headers = parts[0].strip().replace("LONG", "x".repeat(SubscriptionJson.MAX_HEADER_VALUE + 1));
        com.fasterxml.jackson.databind.JsonNode body = JSON.readTree("{\"name\": \"old\", \"operations\": "
                + parts[1].strip() + ", \"destination\": {\"type\": \"webhook\", \"url\": \"" + parts[2].strip()
                + "\", \"headers\": " + headers + "}}");
        assertThatThrownBy(() -> SubscriptionJson.parse(body)).isInstanceOf(SubscriptionException.class);
        assertThat(SubscriptionJson.parseStored(body).name()).isEqualTo("old");
    }

    /** A header value longer than servers take is refused when written. */
    @org.junit.jupiter.api.Test
    void aHeaderValueLongerThanServersTakeIsRefused() throws Exception {
        com.fasterxml.jackson.databind.JsonNode body = new com.fasterxml.jackson.databind.ObjectMapper().readTree(
                "{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://x\", \"headers\":"
                + " {\"X-Key\": \"" + "x".repeat(SubscriptionJson.MAX_HEADER_VALUE + 1) + "\"}}}");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> SubscriptionJson.parse(body))
                .isInstanceOf(SubscriptionException.class).hasMessageContaining("4096 at most");
        org.assertj.core.api.Assertions.assertThat(SubscriptionJson.parse(new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(body.toString().replace("x".repeat(SubscriptionJson.MAX_HEADER_VALUE + 1),
                        "x".repeat(SubscriptionJson.MAX_HEADER_VALUE)))).name()).isEqualTo("a");
    }

    /**
     * Headers that fit one by one but not together: servers refuse a request whose header section
     * passes 8 to 16 KB, or has more than 100 fields, walhook's own included, so every request would
     * fail, to be retried and queued for good. Refused when written; an earlier walhook's stored body
     * still reads.
     */
    @org.junit.jupiter.api.Test
    void headersServersWouldRefuseTogetherAreRefused() throws Exception {
        StringBuilder many = new StringBuilder("{");
        for (int i = 0; i <= SubscriptionJson.MAX_HEADERS; i++) {
            many.append(i == 0 ? "" : ", ").append("\"X-H").append(i).append("\": \"v\"");
        }
        StringBuilder large = new StringBuilder("{");
        for (int i = 0; i < 5; i++) {
            large.append(i == 0 ? "" : ", ").append("\"X-Token-").append(i).append("\": \"")
                    .append("x".repeat(SubscriptionJson.MAX_HEADER_VALUE)).append('"');
        }
        for (String headers : java.util.List.of(many.append('}').toString(), large.append('}').toString())) {
            com.fasterxml.jackson.databind.JsonNode body = JSON.readTree("{\"name\": \"a\", \"destination\": {\"type\":"
                    + " \"webhook\", \"url\": \"http://x/h\", \"headers\": " + headers + "}}");
            assertThatThrownBy(() -> SubscriptionJson.parse(body)).isInstanceOf(SubscriptionException.class)
                    .hasMessageContaining("at most " + SubscriptionJson.MAX_HEADERS + " headers of "
                            + SubscriptionJson.MAX_HEADER_BYTES + " bytes together")
                    .satisfies(e -> assertThat(((SubscriptionException) e).field()).isEqualTo("/destination/headers"));
            assertThat(SubscriptionJson.parseStored(body).name()).isEqualTo("a");
        }
        // at the bounds: taken
        StringBuilder fits = new StringBuilder("{");
        int left = SubscriptionJson.MAX_HEADER_BYTES;
        for (int i = 0; left > 0; i++) {
            String name = "X-Token-" + i;
            int value = Math.min(SubscriptionJson.MAX_HEADER_VALUE, left - name.length() - 4);
            fits.append(i == 0 ? "" : ", ").append('"').append(name).append("\": \"").append("x".repeat(value)).append('"');
            left -= name.length() + value + 4;
        }
        assertThat(SubscriptionJson.parse(JSON.readTree("{\"name\": \"a\", \"destination\": {\"type\": \"webhook\","
                + " \"url\": \"http://x/h\", \"headers\": " + fits.append('}') + "}}")).name()).isEqualTo("a");
    }

    /** An AMQP subscription an earlier walhook stored with batching (which it ignored) still reads. */
    @org.junit.jupiter.api.Test
    void aStoredAmqpSubscriptionWithBatchingStillReads() throws Exception {
        com.fasterxml.jackson.databind.JsonNode body = JSON.readTree("{\"name\": \"old\", \"batch\": {\"max_events\": 50},"
                + " \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}}");
        assertThatThrownBy(() -> SubscriptionJson.parse(body)).isInstanceOf(SubscriptionException.class)
                .hasMessageContaining("one AMQP message");
        assertThat(SubscriptionJson.parseStored(body).name()).isEqualTo("old");
    }

    /**
     * The secret the Standard Webhooks specification prints as its example (docs everywhere copy
     * it) is refused when written: anyone could sign with it. One stored by an earlier walhook
     * is read as it was, its subscription delivering as before.
     */
    @Test
    void aPublishedExampleSecretIsRefusedWhenWrittenAndReadWhenStored() throws Exception {
        for (String published : java.util.List.of("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\u0020")) {
            com.fasterxml.jackson.databind.JsonNode body = JSON.readTree("{\"name\": \"a\", \"destination\": {\"type\": \"webhook\", \"url\":"
                    + " \"https://hooks.example.com/a\", \"secret\": \"" + published + "\"}}");
            assertThatThrownBy(() -> SubscriptionJson.parse(body)).isInstanceOfSatisfying(SubscriptionException.class,
                    e -> assertThat(e.field() + " " + e.getMessage()).startsWith("/destination/secret")
                            .contains("the example the Standard Webhooks specification prints").doesNotContain("MfKQ9r8"));
            assertThat(((Destination.Webhook) SubscriptionJson.parseStored(body).destination()).secrets()).hasSize(1);
        }
    }

    /**
     * A URL is read without the blanks around it: the check that keeps the old host's secret and
     * headers from a patch's other host reads it the same way, stored or patched (a blank made it
     * "no URL" there, and the old host's Authorization went to the new one).
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "https://hooks.example.com/a|' https://evil.example/x'",
        "https://hooks.example.com/a|'https://evil.example/x\n'",
        "' https://hooks.example.com/a'|https://evil.example/x",
        "'https://hooks.example.com/a '|'\tHTTPS://EVIL.example:443/x '"})
    void aPatchToAnotherHostNeedsTheOldHostsCredentialsGivenAgainWhateverBlanksSurroundEitherUrl(String stored,
            String patched) throws Exception {
        com.fasterxml.jackson.databind.node.ObjectNode body = JSON.createObjectNode();
        body.put("name", "a");
        body.putObject("destination").put("url", stored.translateEscapes()).put("secret", "whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE=")
                .putObject("headers").put("Authorization", "Bearer tenant-token");
        com.fasterxml.jackson.databind.node.ObjectNode patch = JSON.createObjectNode();
        patch.putObject("destination").put("url", patched.translateEscapes());
        assertThatThrownBy(() -> SubscriptionJson.patched(body, patch)).isInstanceOfSatisfying(SubscriptionException.class,
                e -> assertThat(e.field()).isEqualTo("/destination/secret"));
        com.fasterxml.jackson.databind.node.ObjectNode samePlace = JSON.createObjectNode();
        samePlace.putObject("destination").put("url", " https://HOOKS.example.com:443/a?v=2 ");
        assertThat(SubscriptionJson.patched(body, samePlace).at("/destination/headers/Authorization").asText())
                .as("another query string of the same origin and path keeps them").isEqualTo("Bearer tenant-token");
    }

    /**
     * Hosts shared between tenants by path (webhook.site, Zapier's catch hooks, a gateway routing by
     * path): a patch moving the URL to another path of the same host kept the old path's secret and
     * headers, so a write-token holder could receive them at a path of their own there.
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "https://webhook.site/3f1c2a|https://webhook.site/9e77d0",
        "https://hooks.zapier.com/hooks/catch/1/a/|https://hooks.zapier.com/hooks/catch/1/a",
        "https://gw.example/t/A|https://gw.example/t/a",
        "https://gw.example/t/a%2Fb|https://gw.example/t/a/b",
        "https://gw.example|https://gw.example/other"})
    void aPatchToAnotherPathOfTheSameHostNeedsTheCredentialsGivenAgain(String stored, String patched) throws Exception {
        com.fasterxml.jackson.databind.node.ObjectNode body = tenantHook(stored);
        com.fasterxml.jackson.databind.node.ObjectNode patch = JSON.createObjectNode();
        patch.putObject("destination").put("url", patched);
        assertThatThrownBy(() -> SubscriptionJson.patched(body, patch)).isInstanceOfSatisfying(SubscriptionException.class,
                e -> assertThat(e.field()).isEqualTo("/destination/secret"));
        patch.withObject("/destination").put("secret", "whsec_OtherTenantSecret000000000000000").putNull("headers");
        com.fasterxml.jackson.databind.JsonNode moved = SubscriptionJson.patched(body, patch);
        assertThat(moved.at("/destination/headers").isMissingNode()).isTrue();
        assertThat(moved.at("/destination/url").asText()).isEqualTo(patched);
    }

    /**
     * A null removing a header the subscription does not have (a misspelt name) was taken, and the
     * header meant was still sent: refused, as a null naming no field is. In a patch to another
     * endpoint, whose headers are taken whole, a null removes nothing and is no mistake.
     */
    @Test
    void aPatchRemovingAHeaderTheSubscriptionDoesNotHaveIsRefused() throws Exception {
        com.fasterxml.jackson.databind.node.ObjectNode body = tenantHook("https://hooks.example.com/a");
        com.fasterxml.jackson.databind.node.ObjectNode misspelt = JSON.createObjectNode();
        misspelt.putObject("destination").putObject("headers").putNull("Authorisation");
        assertThatThrownBy(() -> SubscriptionJson.patched(body, misspelt)).isInstanceOfSatisfying(SubscriptionException.class,
                e -> {
                    assertThat(e.field()).isEqualTo("/destination/headers/Authorisation");
                    assertThat(e.getMessage()).contains("Authorization").doesNotContain("tenant-token");
                });
        com.fasterxml.jackson.databind.node.ObjectNode removed = JSON.createObjectNode();
        removed.putObject("destination").putObject("headers").putNull("AUTHORIZATION");
        assertThat(SubscriptionJson.patched(body, removed).at("/destination/headers").isEmpty()).isTrue();
        com.fasterxml.jackson.databind.node.ObjectNode moved = JSON.createObjectNode();
        moved.putObject("destination").put("url", "https://other.example/b").putNull("secret").putObject("headers")
                .putNull("Authorization").put("X-New", "n");
        assertThat(SubscriptionJson.patched(body, moved).at("/destination/headers").toString()).isEqualTo("{\"X-New\":\"n\"}");
    }

    /** A stored webhook subscription with a secret and an Authorization header, at the URL given. */
    private static com.fasterxml.jackson.databind.node.ObjectNode tenantHook(String url) {
        com.fasterxml.jackson.databind.node.ObjectNode body = JSON.createObjectNode();
        body.put("name", "a");
        body.putObject("destination").put("url", url).put("secret", "whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE=")
                .putObject("headers").put("Authorization", "Bearer tenant-token");
        return body;
    }

    /** The same endpoint written another way (an empty path and "/", a default port, a host's case) keeps them. */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "https://gw.example|https://gw.example/",
        "https://gw.example/|https://GW.example:443",
        "http://gw.example:80/t/a?x=1|HTTP://gw.example/t/a?x=2"})
    void theSameEndpointWrittenAnotherWayKeepsTheCredentials(String stored, String patched) throws Exception {
        com.fasterxml.jackson.databind.node.ObjectNode body = tenantHook(stored);
        com.fasterxml.jackson.databind.node.ObjectNode patch = JSON.createObjectNode();
        patch.putObject("destination").put("url", patched);
        com.fasterxml.jackson.databind.JsonNode moved = SubscriptionJson.patched(body, patch);
        assertThat(moved.at("/destination/headers/Authorization").asText()).isEqualTo("Bearer tenant-token");
        assertThat(moved.at("/destination/secret").asText()).isEqualTo("whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE=");
    }

    /**
     * A stored URL the reading refuses now (an https host holding '_', stored before that rule): the
     * check read it as no URL, and let a patch to another host take the old one's credentials.
     */
    @Test
    void aPatchToAnotherHostNeedsTheCredentialsGivenAgainThoughTheStoredUrlIsNoLongerAccepted() throws Exception {
        com.fasterxml.jackson.databind.node.ObjectNode body = JSON.createObjectNode();
        body.put("name", "a");
        body.putObject("destination").put("url", "https://hooks_v2.internal/a")
                .putObject("headers").put("Authorization", "Bearer tenant-token");
        com.fasterxml.jackson.databind.node.ObjectNode patch = JSON.createObjectNode();
        patch.putObject("destination").put("url", "https://evil.example/x");
        assertThatThrownBy(() -> SubscriptionJson.patched(body, patch)).isInstanceOfSatisfying(SubscriptionException.class,
                e -> assertThat(e.field()).isEqualTo("/destination/headers"));
    }
}
