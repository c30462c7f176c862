package io.walhook.routing;

import java.net.URI;
import java.util.List;
import java.util.Map;

import io.walhook.config.UrlAuthority;

/** Where a subscription's events go. */
public sealed interface Destination {

    /**
     * An HTTP endpoint. {@code secrets} are Standard Webhooks signing keys (the decoded part of
     * {@code whsec_...}); several at once sign with each, for rotation. Never logged or returned;
     * nor are the header values or the URL's query string (and user info), which often carry
     * credentials too: views show {@link #redactedUrl()}. Logs and errors show {@link #loggedUrl()},
     * which also hides the path segments that may be credentials (Slack, Discord, Teams or n8n
     * incoming webhooks carry theirs in the path): logs travel further than the API's answers.
     */
    record Webhook(URI url, List<byte[]> secrets, Map<String, String> headers) implements Destination {

        /**
         * Credentials shorter than this are not taken out of error texts: they cannot be told
         * from the digits and words of the text itself (a header value {@code 1}).
         */
        private static final int SHORTEST_REDACTED = 4;

        public Webhook {
            secrets = List.copyOf(secrets);
            headers = Map.copyOf(headers);
        }

        /** Shown in a log or an error in place of a path segment that may be a credential. */
        static final String HIDDEN_SEGMENT = "[redacted]";

        /**
         * A path segment this long (percent-decoded) may be a credential when it holds a letter and
         * a digit (a Slack token, {@code /services/T0/B0/XXXXXXXXXXXXXXXXXXXXXXXX}, a Discord one,
         * the GUIDs of a Teams or n8n webhook) or only letters, a quarter of them or more capitals
         * and as many small ones (the one Slack token in 70 that holds no digit). Shorter ones,
         * words and most camel-case names ({@code OrdersAndInvoicesExport}, not {@code HandleNewUserSignUp})
         * are shown: a guess, which docs/api.md spells out.
         */
        private static final int SHORTEST_HIDDEN_SEGMENT = 16;

        /** A host name's first label this long may be a credential too (a Pipedream endpoint's are 15 characters). */
        private static final int SHORTEST_HIDDEN_LABEL = 15;

        /** {@code scheme://host:port/path}: the URL without its query string, user info and fragment. */
        public String redactedUrl() {
            return origin() + (url.getRawPath() == null ? "" : url.getRawPath());
        }

        /**
         * {@link #redactedUrl()} with every path segment that may be a credential (see
         * {@link #mayBeCredential}) shown as {@value #HIDDEN_SEGMENT}, and the host name's first label
         * too when it may be one and holds no '-' (a Pipedream endpoint's {@code eo3kz7m2x9q1ab8.m.pipedream.net};
         * not {@code orders-service-v2}): how logs and errors name the destination.
         */
        public String loggedUrl() {
            return url.getScheme() + "://" + loggedHost(UrlAuthority.host(url)) + port() + loggedPath();
        }

        /** The host name with its first label hidden when it may be a credential (see {@link #loggedUrl()}). */
        private static String loggedHost(String host) {
            String label = hiddenLabel(host);
            return label == null ? host : HIDDEN_SEGMENT + host.substring(label.length());
        }

        /** The host name's first label when logs hide it, else null. */
        private static String hiddenLabel(String host) {
            if (host == null || host.startsWith("[")) {
                return null;
            }
            String label = host.split("\\.", 2)[0];
            return label.indexOf('-') < 0 && mayBeCredential(label, SHORTEST_HIDDEN_LABEL) ? label : null;
        }

        private String origin() {
            return url.getScheme() + "://" + UrlAuthority.host(url) + port();
        }

        private String port() {
            int port = UrlAuthority.port(url);
            return port < 0 ? "" : ":" + port;
        }

        private String loggedPath() {
            String path = url.getRawPath();
            if (path == null) {
                return "";
            }
            String[] segments = path.split("/", -1);
            for (int i = 0; i < segments.length; i++) {
                segments[i] = mayBeCredential(segments[i]) ? HIDDEN_SEGMENT : segments[i];
            }
            return String.join("/", segments);
        }

        /** The path's segments that {@link #loggedUrl()} hides, as written and percent-decoded. */
        private List<String> credentialSegments() {
            List<String> hidden = new java.util.ArrayList<>();
            if (url.getRawPath() != null) {
                for (String segment : url.getRawPath().split("/")) {
                    if (mayBeCredential(segment)) {
                        hidden.add(segment);
                        hidden.add(decoded(segment));
                    }
                }
            }
            return hidden;
        }

        /** Whether this path segment (as written) may be a credential: long, with letters and digits or mixed-case letters. */
        static boolean mayBeCredential(String rawSegment) {
            return mayBeCredential(rawSegment, SHORTEST_HIDDEN_SEGMENT);
        }

        private static boolean mayBeCredential(String rawSegment, int shortest) {
            String segment = decoded(rawSegment);
            int length = segment.codePointCount(0, segment.length());
            if (length < shortest) {
                return false;
            }
            int letters = 0;
            int capitals = 0;
            int small = 0;
            boolean digit = false;
            for (int i = 0; i < segment.length(); i++) {
                char c = segment.charAt(i);
                letters += Character.isLetter(c) ? 1 : 0;
                capitals += Character.isUpperCase(c) ? 1 : 0;
                small += Character.isLowerCase(c) ? 1 : 0;
                digit |= c >= '0' && c <= '9';
            }
            return letters > 0 && digit || letters == length && capitals * 4 >= length && small * 4 >= length;
        }

        private static String decoded(String rawSegment) {
            try {
                return java.net.URLDecoder.decode(rawSegment.replace("+", "%2B"), java.nio.charset.StandardCharsets.UTF_8);
            } catch (IllegalArgumentException notEncoded) {
                return rawSegment;
            }
        }

        /**
         * This text (an HTTP client's error message, which may quote the request) with the URL
         * shown as {@link #loggedUrl()} and every credential of the destination taken out: the
         * query string and its values, the user info, the path segments that may be credentials
         * and the header values.
         */
        public String redact(String text) {
            if (text == null) {
                return null;
            }
            String redacted = text.replace(url.toString(), loggedUrl());
            if (url.getRawQuery() != null) {
                redacted = redacted.replace("?" + url.getRawQuery(), "");
            }
            String userInfo = UrlAuthority.rawUserInfo(url);
            if (userInfo != null) {
                redacted = redacted.replace(userInfo + "@", "");
            }
            if (url.getRawFragment() != null) {
                redacted = redacted.replace("#" + url.getRawFragment(), "");
            }
            List<String> credentials = new java.util.ArrayList<>();
            java.util.stream.Stream.of(url.getRawQuery(), url.getQuery(), userInfo, url.getUserInfo())
                    .filter(java.util.Objects::nonNull).forEach(credentials::add);
            if (url.getRawQuery() != null) {
                for (String pair : url.getRawQuery().split("&")) {
                    String value = pair.substring(pair.indexOf('=') + 1);
                    credentials.add(value);
                    credentials.add(java.net.URLDecoder.decode(value, java.nio.charset.StandardCharsets.UTF_8));
                }
            }
            credentials.addAll(credentialSegments());
            java.util.Optional.ofNullable(hiddenLabel(UrlAuthority.host(url))).ifPresent(credentials::add);
            credentials.addAll(headers.values());
            // longest first: a query value inside a path token would otherwise cut it, and its rest stay
            credentials.sort(java.util.Comparator.comparingInt(String::length).reversed());
            for (String credential : credentials) {
                if (credential.length() >= SHORTEST_REDACTED) {
                    redacted = redacted.replace(credential, "[redacted]");
                }
            }
            return redacted;
        }

        /**
         * This text with every URL in it shown as {@link #loggedUrl()} shows a destination: no user
         * info, query string or fragment, and the path segments that may be credentials hidden; so
         * too an absolute path quoted on its own ({@code executing POST /services/T0/B0/XXXX for
         * server hooks.slack.com:443}, as the HTTP client words a timeout). For error texts stored
         * with queued events by a walhook older than 2026-12-05, which named the destination with its
         * path as written (and for any URL a server's error quoted).
         */
        public static String scrubbed(String text) {
            if (text == null || text.indexOf('/') < 0) {
                return text;
            }
            // user info first, whatever it holds but a '/', '?', '#' or '@' (a quote ends no URL here), in a nested URL too
            String rest = USER_INFO.matcher(text).replaceAll("$1");
            java.util.regex.Matcher url = URL_IN_TEXT.matcher(rest);
            StringBuilder out = new StringBuilder();
            while (url.find()) {
                url.appendReplacement(out, java.util.regex.Matcher.quoteReplacement(logged(url.group())));
            }
            return url.appendTail(out).toString();
        }

        /** A URL's or a path's characters, not ending in the punctuation of the sentence around it. */
        private static final String URL_REST = "[^\\s\"'<>]*[^\\s\"'<>.,;:)\\]]";
        private static final java.util.regex.Pattern USER_INFO = java.util.regex.Pattern.compile("(://)[^\\s/?#@]*@");
        private static final java.util.regex.Pattern URL_IN_TEXT = java.util.regex.Pattern.compile(
                "(?i)\\b(?:https?|amqps?)://" + URL_REST + "|(?<![^\\s(])/" + URL_REST);

        private static String logged(String url) {
            int start = url.startsWith("/") ? 0 : url.indexOf("://") + 3;
            int end = url.length();
            for (char c : new char[] {'?', '#'}) {
                int at = url.indexOf(c, start);
                end = at < 0 ? end : Math.min(end, at);
            }
            String rest = url.substring(start, end);
            int slash = rest.indexOf('/');
            String authority = slash < 0 ? rest : rest.substring(0, slash);
            String[] segments = (slash < 0 ? "" : rest.substring(slash)).split("/", -1);
            for (int i = 0; i < segments.length; i++) {
                segments[i] = mayBeCredential(segments[i]) ? HIDDEN_SEGMENT : segments[i];
            }
            int port = authority.lastIndexOf(':');
            String host = port > authority.lastIndexOf(']') ? authority.substring(0, port) : authority;
            return url.substring(0, start) + loggedHost(host) + authority.substring(host.length()) + String.join("/", segments);
        }

        @Override
        public String toString() {
            return "webhook " + loggedUrl() + (secrets.isEmpty() ? "" : " (signed)");
        }
    }

    /** An AMQP 1.0 address; {@code {schema}}, {@code {table}} and {@code {op}} are substituted per event. */
    record Amqp(String address) implements Destination {

        /** The address of this event: {@code {schema}}, {@code {table}} and {@code {op}} substituted (empty where an event has none). */
        public String address(io.walhook.change.ChangeEvent event) {
            return address(parts(event));
        }

        /** An event's schema, table and operation, the parts of an address: kept with its queued copies. */
        public static String[] parts(io.walhook.change.ChangeEvent event) {
            return new String[] {event.schema() == null ? "" : event.schema(), event.table() == null ? "" : event.table(),
                event.op().wireName()};
        }

        private static final java.util.regex.Pattern PLACEHOLDER = java.util.regex.Pattern.compile("\\{[^{}]*}");

        /**
         * The first {@code {...}} of an address that is none of {@code {schema}}, {@code {table}} and
         * {@code {op}} (a misspelt one, sent as written), or null.
         */
        public static String unknownPlaceholder(String address) {
            java.util.regex.Matcher m = PLACEHOLDER.matcher(address);
            while (m.find()) {
                if (!java.util.List.of("{schema}", "{table}", "{op}").contains(m.group())) {
                    return m.group();
                }
            }
            return null;
        }

        /** The address of the event of these {@link #parts}. */
        public String address(String[] parts) {
            if (address.indexOf('{') < 0) {
                return address;
            }
            // in one pass: a schema or table name holding "{table}" or "{op}" is not replaced again
            java.util.regex.Matcher m = PLACEHOLDER.matcher(address);
            StringBuilder resolved = new StringBuilder(address.length() + 32);
            while (m.find()) {
                String value = switch (m.group()) {
                    case "{schema}" -> parts[0];
                    case "{table}" -> parts[1];
                    case "{op}" -> parts[2];
                    default -> m.group();
                };
                m.appendReplacement(resolved, java.util.regex.Matcher.quoteReplacement(value));
            }
            return m.appendTail(resolved).toString();
        }

        @Override
        public String toString() {
            return "amqp address " + address;
        }
    }
}
