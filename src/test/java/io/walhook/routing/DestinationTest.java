package io.walhook.routing;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** A webhook destination shows itself without its credentials: the URL's query string, user info and header values. */
class DestinationTest {

    private static Destination.Webhook webhook(String url, Map<String, String> headers) {
        return new Destination.Webhook(URI.create(url), List.of(), headers);
    }

    @ParameterizedTest
    @CsvSource({
        "https://hooks.example.com:8443/a/b?token=s3cr3t#part, https://hooks.example.com:8443/a/b",
        "https://hooks.example.com/a/b?token=s3cr3t,           https://hooks.example.com/a/b",
        "http://user:pa55word@10.0.0.1:8080/h,                 http://10.0.0.1:8080/h",
        "http://[::1]:9/x?q=1,                                 http://[::1]:9/x",
        "http://h/,                                            http://h/",
        "http://h,                                             http://h",
        "http://h/a%20b?x=%2F,                                 http://h/a%20b",
    })
    void theRedactedUrlIsSchemeHostPortAndPath(String url, String redacted) {
        Destination.Webhook destination = webhook(url, Map.of());
        assertThat(destination.redactedUrl()).isEqualTo(redacted);
        assertThat(destination.toString()).isEqualTo("webhook " + redacted);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        // Slack: the workspace and channel ids stay, the token goes
        "https://hooks.slack.com/services/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 | https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/[redacted]",
        // Discord: the numeric id stays, the token goes
        "https://discord.com/api/webhooks/1234567890123456789/aB3-dE6_gH9iJ2kL5mN8oP1qR4sT7uV0wX3yZ6 | https://discord.com/api/webhooks/1234567890123456789/[redacted]",
        // n8n or Teams: GUIDs
        "https://n8n.example.com/webhook/6f1c2a9e-0b7d-4e35-9a8c-2d4f6b8e1a3c | https://n8n.example.com/webhook/[redacted]",
        "https://x.webhook.office.com/webhookb2/6f1c2a9e-0b7d-4e35-9a8c-2d4f6b8e1a3c@0d2e4f6a-8b1c-4d3e-9f5a-7b9c1d3e5f7a/IncomingWebhook/0123456789abcdef0123456789abcdef"
                + " | https://x.webhook.office.com/webhookb2/[redacted]/IncomingWebhook/[redacted]",
        // percent-encoded, and with a query string
        "https://h.example.com/t/Xq7mB2kLp9Rt%2B4vWz8nY?token=s3cr3t | https://h.example.com/t/[redacted]",
        // a Slack token without a digit
        "https://hooks.slack.com/services/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 | https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/[redacted]",
        // names: short, or long without a digit, or camel case
        "https://api.example.com/hooks/OrdersAndInvoicesExport | https://api.example.com/hooks/OrdersAndInvoicesExport",
        "https://api.example.com/v1/tenants/42/walhook-events | https://api.example.com/v1/tenants/42/walhook-events",
        "https://api.example.com/orders-and-invoices-export/ | https://api.example.com/orders-and-invoices-export/",
        "https://api.example.com/webhook-v2-prod | https://api.example.com/webhook-v2-prod",
        "http://h | http://h",
        "http://h/ | http://h/",
    })
    void logsHidePathSegmentsThatMayBeCredentialsWhileViewsShowThePath(String url, String logged) {
        Destination.Webhook destination = webhook(url, Map.of());
        assertThat(destination.loggedUrl()).isEqualTo(logged);
        assertThat(destination.toString()).isEqualTo("webhook " + logged);
        assertThat(destination.redactedUrl()).isEqualTo(url.replaceFirst("\\?.*", ""));
        assertThat(destination.redact("POST " + url + " failed")).isEqualTo("POST " + logged + " failed");
    }

    /** A quoted schema or table name may hold a placeholder's text: it is the name, not replaced again. */
    @Test
    void anAmqpAddressReplacesEachPlaceholderOnceWhateverTheNamesHold() {
        Destination.Amqp amqp = new Destination.Amqp("cdc.{schema}.{table}.{op}");
        assertThat(amqp.address(new String[] {"public", "orders", "insert"})).isEqualTo("cdc.public.orders.insert");
        assertThat(amqp.address(new String[] {"x{table}", "{op}s", "update"})).isEqualTo("cdc.x{table}.{op}s.update");
        assertThat(amqp.address(new String[] {"a$1\\", "t", "delete"})).isEqualTo("cdc.a$1\\.t.delete");
        assertThat(new Destination.Amqp("fixed").address(new String[] {"s", "t", "insert"})).isEqualTo("fixed");
    }

    @Test
    void aPathCredentialQuotedWithoutItsHostIsTakenOutOfAMessage() {
        Destination.Webhook destination = webhook("https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/Xq7mB2kLp9Rt%2B4vWz8nYc3",
                Map.of());
        assertThat(destination.redact("The timeout period of 1000ms has been exceeded while executing POST"
                + " /services/T0AB12CD3/B0EF45GH6/Xq7mB2kLp9Rt%2B4vWz8nYc3 for server hooks.slack.com:443; token Xq7mB2kLp9Rt+4vWz8nYc3"))
                .isEqualTo("The timeout period of 1000ms has been exceeded while executing POST"
                        + " /services/T0AB12CD3/B0EF45GH6/[redacted] for server hooks.slack.com:443; token [redacted]");
    }

    @Test
    void aQueryValueInsideAPathTokenDoesNotLeaveTheTokensRest() {
        Destination.Webhook destination = webhook("https://h.example.com/t/Xq7mB2kLp9Rt4vWz8nYc?k=B2kL", Map.of());
        assertThat(destination.redact("executing POST /t/Xq7mB2kLp9Rt4vWz8nYc?k=B2kL"))
                .isEqualTo("executing POST /t/[redacted]");
    }

    /**
     * Pipedream-style endpoints carry their secret in the host name's first label: logs and errors
     * hide it as they hide such a path segment; views show it, as they show the path. A label with
     * a '-' is a name ({@code orders-service-v2}, a load balancer's), shown.
     */
    @Test
    void aHostLabelThatMayBeACredentialIsHiddenInLogsAndErrors() {
        Destination.Webhook pipedream = webhook("https://eo3kz7m2x9q1ab8.m.pipedream.net/", Map.of());
        assertThat(pipedream.loggedUrl()).isEqualTo("https://[redacted].m.pipedream.net/");
        assertThat(pipedream.redactedUrl()).isEqualTo("https://eo3kz7m2x9q1ab8.m.pipedream.net/");
        assertThat(pipedream.redact("UnknownHostException: Failed to resolve 'eo3kz7m2x9q1ab8.m.pipedream.net'"))
                .isEqualTo("UnknownHostException: Failed to resolve '[redacted].m.pipedream.net'");
        assertThat(webhook("http://my-loadbalancer-1234567890.us-west-2.elb.amazonaws.com:8080/h", Map.of()).loggedUrl())
                .isEqualTo("http://my-loadbalancer-1234567890.us-west-2.elb.amazonaws.com:8080/h");
        assertThat(webhook("http://orders-service-v2.shop.svc.cluster.local/h", Map.of()).loggedUrl())
                .isEqualTo("http://orders-service-v2.shop.svc.cluster.local/h");
        assertThat(webhook("http://10.0.0.7:8080/h", Map.of()).loggedUrl()).isEqualTo("http://10.0.0.7:8080/h");
        assertThat(webhook("http://[2001:db8::1]:8080/h", Map.of()).loggedUrl()).isEqualTo("http://[2001:db8::1]:8080/h");
    }

    @Test
    void everyUrlInAStoredTextIsShownAsLogsShowADestination() {
        assertThat(Destination.Webhook.scrubbed(null)).isNull();
        assertThat(Destination.Webhook.scrubbed("HTTP 503: service unavailable")).isEqualTo("HTTP 503: service unavailable");
        assertThat(Destination.Webhook.scrubbed("HTTP 404 from https://ops:pa55word@hooks.slack.com/services/T0AB12CD3/"
                + "B0EF45GH6/Xq7mB2kLp9Rt4vWz8nYc3Dd1?channel=s3cr3t#x: no_team"))
                .isEqualTo("HTTP 404 from https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/[redacted]: no_team");
        // the HTTP client's own words for a timeout, as an earlier walhook stored them: the path alone
        assertThat(Destination.Webhook.scrubbed("The timeout period of 10000ms has been exceeded while executing POST"
                + " /services/T0AB12CD3/B0EF45GH6/Xq7mB2kLp9Rt4vWz8nYc3Dd1 for server hooks.slack.com:443"))
                .isEqualTo("The timeout period of 10000ms has been exceeded while executing POST"
                        + " /services/T0AB12CD3/B0EF45GH6/[redacted] for server hooks.slack.com:443");
        assertThat(Destination.Webhook.scrubbed("redirected from HTTP://a.example.com/hooks/N8nWebhook0123456789abcdef to"
                + " 'https://b.example.com:8443/ok' (see https://b.example.com/t/Xq7mB2kLp9Rt4vWz8nYc3Dd1)."))
                .isEqualTo("redirected from HTTP://a.example.com/hooks/[redacted] to 'https://b.example.com:8443/ok'"
                        + " (see https://b.example.com/t/[redacted]).");
        assertThat(Destination.Webhook.scrubbed("amqps://user:s3cret@broker:5671 refused")).isEqualTo("amqps://broker:5671 refused");
        assertThat(Destination.Webhook.scrubbed("cannot reach https://ops:pa'ss@hooks.example.com/x"))
                .as("a quote in the user info").isEqualTo("cannot reach https://hooks.example.com/x");
        assertThat(Destination.Webhook.scrubbed("via https://proxy.internal/fetch/https://ops:pa55word@hooks.example.com/x"))
                .as("a URL in a URL").isEqualTo("via https://proxy.internal/fetch/https://hooks.example.com/x");
        assertThat(Destination.Webhook.scrubbed("HTTP/1.1 502 at 2026/12/05, see /docs/errors#502"))
                .isEqualTo("HTTP/1.1 502 at 2026/12/05, see /docs/errors");
        String already = webhook("https://hooks.slack.com/services/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", Map.of())
                .redact("HTTP 500 from https://hooks.slack.com/services/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");
        assertThat(Destination.Webhook.scrubbed(already)).as("a text this walhook wrote").isEqualTo(already);
    }

    @Test
    void anHttpClientMessageQuotingTheRequestLosesItsCredentials() {
        Destination.Webhook destination = webhook("https://u:pa55word@hooks.example.com:8443/a/b?token=s3cr3t&n=1#frag",
                Map.of("X-Api-Key", "h3ader-value", "X-Short", "1"));
        assertThat(destination.redact("The timeout period of 1000ms has been exceeded while executing POST"
                + " /a/b?token=s3cr3t&n=1 for server hooks.example.com:8443"))
                .isEqualTo("The timeout period of 1000ms has been exceeded while executing POST /a/b for server"
                        + " hooks.example.com:8443");
        assertThat(destination.redact("cannot reach https://u:pa55word@hooks.example.com:8443/a/b?token=s3cr3t&n=1#frag"))
                .isEqualTo("cannot reach https://hooks.example.com:8443/a/b");
        assertThat(destination.redact("rejected key h3ader-value, user u:pa55word, token s3cr3t, 1 of 10"))
                .isEqualTo("rejected key [redacted], user [redacted], token [redacted], 1 of 10");
        assertThat(destination.redact(null)).isNull();
    }

    @Test
    void aPercentEncodedQueryValueIsTakenOutInEitherForm() {
        Destination.Webhook destination = webhook("https://h/p?token=s%33cr%33t%2Bx", Map.of());
        assertThat(destination.redact("token=s3cr3t+x or s%33cr%33t%2Bx")).isEqualTo("[redacted] or [redacted]");
    }
}
