package io.walhook.config;

/**
 * What a problem with a URL's authority (its {@code [user[:password]@]host[:port]}) may show: the
 * part where a password cannot be. A password holding an unencoded '@', '/', '?' or '#' breaks the
 * URL right there, and the message goes to the start-up log and to API answers.
 */
public final class UrlAuthority {

    /**
     * An authority {@link java.net.URI} reads as registry-based only because its host name holds
     * '_': RFC 3986 allows it in a name (RFC 2396, which {@code URI} follows, did not), and Docker
     * Compose's service names and many internal DNS names have it.
     */
    private static final java.util.regex.Pattern UNDERSCORED = java.util.regex.Pattern.compile(
            "(?:([^@]*)@)?([A-Za-z0-9_-]+(?:\\.[A-Za-z0-9_-]+)*\\.?)(?::([0-9]{0,9}))?");

    private UrlAuthority() {
    }

    /**
     * The host of {@code uri}, as {@link java.net.URI#getHost()}, or a name holding '_' that it did
     * not read as one ({@link #UNDERSCORED}); null when it has none.
     */
    public static String host(java.net.URI uri) {
        String host = uri.getHost();
        if (host != null) {
            return host;
        }
        java.util.regex.Matcher named = underscored(uri);
        return named == null ? null : named.group(2);
    }

    /** The port of {@code uri}, as {@link java.net.URI#getPort()} (-1: none), also after a host {@link #host} read. */
    public static int port(java.net.URI uri) {
        if (uri.getHost() != null) {
            return uri.getPort();
        }
        java.util.regex.Matcher named = underscored(uri);
        return named == null || named.group(3) == null || named.group(3).isEmpty() ? -1 : Integer.parseInt(named.group(3));
    }

    /**
     * {@link #port} of {@code uri} (-1: none), refused when out of range: java.net.URI reads any
     * number, and a connection to port 0 or 70000 fails only when it is first made.
     */
    public static int portInRange(String variable, java.net.URI uri) {
        int port = port(uri);
        if (port == 0 || port > 65_535) {
            // user:2024061/rest@host: a password holding '/', '?' or '#' ends the authority there, its digits the "port"
            String rest = uri.getRawPath() + uri.getRawQuery() + uri.getRawFragment();
            if (rest.contains("@")) { // user info too: an Azure-style user@server name holds one '@' of its own
                throw new ConfigException(variable, "has a port outside 1 to 65535, or a password holding '/', '?' or"
                        + " '#': percent-encode '/', '?', '#' and '@' in a user name or password (%2F, %3F, %23, %40)");
            }
            // not repeated: "amqp://walhook:84736251", its "@host" left out, has the password where the port goes
            throw new ConfigException(variable, "has a port outside 1 to 65535 (or, its @host left out, a password"
                    + " where the port goes)");
        }
        return port;
    }

    /**
     * What a refusal of {@code uri}'s scheme says it is: its scheme, shown only when "//" follows
     * it. "APIKEY123:X@host/path" (a URL without its scheme) reads as scheme "APIKEY123", the user
     * name, which can be the credential.
     */
    public static String schemeShown(java.net.URI uri) {
        String part = uri.getRawSchemeSpecificPart();
        if (uri.getScheme() == null || part == null) {
            return "a URL without a scheme";
        }
        if (part.startsWith("//")) {
            return uri.getScheme() + "://";
        }
        // jdbc:postgresql://... pasted from a Java application's settings: its two schemes
        java.util.regex.Matcher inner = INNER_SCHEME.matcher(part);
        return inner.find() ? uri.getScheme() + ":" + inner.group(1) + "://" : "a URL without a scheme";
    }

    /** A scheme and "//" opening what follows an outer scheme ({@code jdbc:postgresql://}). */
    private static final java.util.regex.Pattern INNER_SCHEME = java.util.regex.Pattern.compile("^([A-Za-z][A-Za-z0-9+.-]*)://");

    /** The raw user info of {@code uri}, as {@link java.net.URI#getRawUserInfo()}, also before a host {@link #host} read. */
    public static String rawUserInfo(java.net.URI uri) {
        if (uri.getHost() != null) {
            return uri.getRawUserInfo();
        }
        java.util.regex.Matcher named = underscored(uri);
        return named == null ? null : named.group(1);
    }

    /**
     * Whether the host of {@code uri} is a name holding '_' ({@link #host}), which TLS cannot
     * check a certificate against in Java (its {@code SNIHostName} refuses it): such a URL is
     * refused with TLS, where the peer's host name is verified, as it could never connect.
     */
    public static boolean underscoredHost(java.net.URI uri) {
        return uri.getHost() == null && host(uri) != null;
    }

    /** Why a URL with TLS and an {@link #underscoredHost} is refused, naming its host. */
    public static String noTlsCheck(String host) {
        return "names the host " + host + " with TLS, and Java cannot check a certificate against a name holding '_';"
                + " use a name without '_' (an alias), or no TLS inside a private network";
    }

    /** Whether an '@' follows the authority: in the path, query or fragment. */
    private static boolean atAfterAuthority(java.net.URI uri) {
        String rest = java.util.Objects.toString(uri.getRawPath(), "") + java.util.Objects.toString(uri.getRawQuery(), "")
                + java.util.Objects.toString(uri.getRawFragment(), "");
        return rest.indexOf('@') >= 0;
    }

    private static java.util.regex.Matcher underscored(java.net.URI uri) {
        String authority = uri.getRawAuthority();
        if (authority == null || authority.indexOf('_') < 0 || atAfterAuthority(uri)) {
            // https://sk_live_Zq9/x@receiver/: user info cut short by its '/', not a host (problem() says so)
            return null;
        }
        java.util.regex.Matcher named = UNDERSCORED.matcher(authority);
        return named.matches() && named.group(2).indexOf('_') >= 0 ? named : null;
    }

    /**
     * The problem with the authority of {@code uri} that did not read as
     * {@code [user[:password]@]host[:port]}.
     */
    public static String problem(java.net.URI uri) {
        String rawAuthority = uri.getRawAuthority();
        int at = rawAuthority.lastIndexOf('@');
        if (at >= 0 && rawAuthority.indexOf('@') != at) {
            return "has more than one '@' before its host: percent-encode '@' in a user name or password as %40";
        }
        if (atAfterAuthority(uri)) {
            // app@server:pass/word@host: the authority ends inside the password, whose start follows the '@' it
            // holds; token:pass/word@host and token/x@host: it holds the user name, which can be the credential (an
            // API key as basic auth's user), and maybe the password's start
            return "has user info cut short by a '/', '?' or '#' before its host: percent-encode '@', '/', '?' and '#'"
                    + " in a user name or password (%40, %2F, %3F, %23)";
        }
        // after the last '@' there is no password; without an '@', what follows a ':' may be one cut short
        String shown = at >= 0 ? rawAuthority.substring(at + 1) : rawAuthority.split(":", 2)[0];
        return "has '" + shown + "' where a host[:port] belongs, and it is not host[:port] (a host name holds letters,"
                + " digits, '-', '_' and '.'; percent-encode '@', '/', '?' and '#' in a user name or password)";
    }
}
