package io.walhook.config;

import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;

/**
 * {@code WALHOOK_AMQP_URL} parsed: {@code amqp://user:password@host:port} or {@code amqps://...}
 * (TLS, verifying the broker's certificate and host name against the JVM's trust store). Default
 * ports 5672 and 5671; no user means SASL ANONYMOUS. Every problem names the variable.
 */
public record AmqpUrl(boolean tls, String host, int port, String user, String password) {

    public static final String VARIABLE = "WALHOOK_AMQP_URL";

    public static AmqpUrl parse(String text) {
        URI uri;
        try {
            uri = new URI(text.strip());
        } catch (URISyntaxException e) {
            throw new ConfigException(VARIABLE, "is not a URL (" + e.getReason() + " at index " + e.getIndex()
                    + "); expected amqp://user:password@host:port");
        }
        if (!"amqp".equals(uri.getScheme()) && !"amqps".equals(uri.getScheme())) {
            // the scheme only: the rest may hold the password
            throw new ConfigException(VARIABLE, "must start with amqp:// or amqps://, not "
                    + UrlAuthority.schemeShown(uri));
        }
        String host = UrlAuthority.host(uri);
        String userInfo = UrlAuthority.rawUserInfo(uri);
        if (host == null || host.isEmpty()) {
            throw new ConfigException(VARIABLE, "names no host; expected amqp://user:password@host:port");
        }
        if (uri.getRawPath() != null && !uri.getRawPath().isEmpty() && !uri.getRawPath().equals("/")) {
            // shown only when no password can be in it: one holding '/' or '#' ends the authority early
            String path = userInfo == null && !text.contains("@") ? " (" + uri.getRawPath() + ")" : "";
            throw new ConfigException(VARIABLE, "has a path" + path + "; addresses belong in"
                    + " WALHOOK_SUBSCRIPTIONS_<NAME>_AMQP_ADDRESS (percent-encode '/', '?', '#' and '@' in a password)");
        }
        if (uri.getRawQuery() != null) {
            throw new ConfigException(VARIABLE, "has parameters (after '?'), which walhook does not read");
        }
        if (uri.getRawFragment() != null) {
            // amqp://walhook:4417#rest@broker: a password holding '#' made the user the host, its digits the port
            throw new ConfigException(VARIABLE, "has a fragment (after '#'); percent-encode '/', '?', '#' and '@' in a"
                    + " password (%2F, %3F, %23, %40)");
        }
        boolean tls = "amqps".equals(uri.getScheme());
        if (tls && UrlAuthority.underscoredHost(uri)) {
            throw new ConfigException(VARIABLE, UrlAuthority.noTlsCheck(host));
        }
        String user = null;
        String password = null;
        if (userInfo != null) {
            String[] info = userInfo.split(":", 2);
            user = decode(info[0]);
            password = info.length > 1 ? decode(info[1]) : "";
        }
        // out of range, the broker's connection (opened at the first message) failed, and every message was queued
        int port = UrlAuthority.portInRange(VARIABLE, uri);
        return new AmqpUrl(tls, host, port < 0 ? (tls ? 5671 : 5672) : port, user, password);
    }

    private static String decode(String s) {
        return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
    }

    /** {@code scheme://host:port}: never the user or the password, as in every log line and error. */
    @Override
    public String toString() {
        return (tls ? "amqps://" : "amqp://") + host + ":" + port;
    }

    /**
     * This text (a broker's or the AMQP client's error message) with the user and the password
     * taken out: wherever they appear, or, shorter than four characters (a user {@code mq}), where
     * they stand as a word of their own, not inside the text's own words.
     */
    public String redact(String text) {
        if (text == null) {
            return null;
        }
        String redacted = text;
        for (String credential : new String[] {password, user}) {
            if (credential == null || credential.isEmpty()) {
                continue;
            }
            redacted = credential.length() >= 4 ? redacted.replace(credential, "[redacted]")
                    : redacted.replaceAll("(?<![\\p{L}\\p{N}])" + java.util.regex.Pattern.quote(credential) + "(?![\\p{L}\\p{N}])",
                            "[redacted]");
        }
        return redacted;
    }
}
