package io.walhook.config;

import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * {@code WALHOOK_SOURCE_URL} parsed: {@code postgresql://user:password@host:port/database?sslmode=...}
 * (libpq's URI form, scheme {@code postgres} accepted too), with the user and password overrides
 * applied. Every problem is reported as a {@link ConfigException} naming the variable.
 */
public record SourceUrl(String host, int port, String database, String user, String password,
        Map<String, String> parameters) {

    public static final String VARIABLE = "WALHOOK_SOURCE_URL";

    /** libpq parameters that mean the same to pgjdbc and the Vert.x client. */
    private static final Set<String> PARAMETERS = Set.of("sslmode", "sslrootcert", "sslcert", "sslkey",
            "application_name", "connect_timeout");
    private static final Set<String> SSL_MODES = Set.of("disable", "allow", "prefer", "require", "verify-ca", "verify-full");

    public SourceUrl {
        parameters = Collections.unmodifiableMap(new LinkedHashMap<>(parameters));
    }

    public static SourceUrl parse(Optional<String> url, Optional<String> user, Optional<String> password) {
        String text = url.map(String::strip).filter(s -> !s.isEmpty()).orElseThrow(() -> new ConfigException(VARIABLE,
                "is required: set it to postgresql://user:password@host:port/database"));
        URI uri;
        try {
            uri = new URI(text);
        } catch (URISyntaxException e) {
            throw new ConfigException(VARIABLE, "is not a URL (" + e.getReason() + " at index " + e.getIndex()
                    + "); expected postgresql://user:password@host:port/database");
        }
        if (!"postgresql".equals(uri.getScheme()) && !"postgres".equals(uri.getScheme())) {
            throw new ConfigException(VARIABLE, "must start with postgresql://, not "
                    + UrlAuthority.schemeShown(uri));
        }
        String host = UrlAuthority.host(uri);
        String userInfo = UrlAuthority.rawUserInfo(uri);
        if (host == null && uri.getRawAuthority() != null) {
            throw new ConfigException(VARIABLE, UrlAuthority.problem(uri));
        }
        if (host == null || host.isEmpty()) {
            throw new ConfigException(VARIABLE, "names no host; expected postgresql://user:password@host:port/database");
        }
        int given = UrlAuthority.portInRange(VARIABLE, uri);
        int port = given < 0 ? 5432 : given;
        String path = uri.getRawPath() == null ? "" : uri.getRawPath();
        String database = path.length() > 1 ? decode(path.substring(1)) : "";
        if (path.contains("@")) {
            // postgresql://app:2024/rest@db/orders: a password holding '/' made "app:2024" the host
            throw new ConfigException(VARIABLE, "has '@' after its host; percent-encode '/', '?', '#' and '@' in a"
                    + " user name, password or database name (%2F, %3F, %23, %40)");
        }
        if (uri.getRawFragment() != null) {
            // libpq URIs have none: a password holding '#' ends the URL's authority there (not quoted)
            throw new ConfigException(VARIABLE, "has a fragment (after '#'), which a PostgreSQL URL does not;"
                    + " percent-encode '/', '?', '#' and '@' in a user name, password or database name (%2F, %3F, %23, %40)");
        }
        if (database.isEmpty() || database.contains("/")) {
            throw new ConfigException(VARIABLE, "must name one database in its path, as in postgresql://host:5432/mydb");
        }
        String urlUser = null;
        String urlPassword = null;
        if (userInfo != null) {
            String[] info = userInfo.split(":", 2);
            urlUser = decode(info[0]);
            urlPassword = info.length > 1 ? decode(info[1]) : null;
        }
        String effectiveUser = user.filter(s -> !s.isBlank()).orElse(urlUser);
        if (effectiveUser == null || effectiveUser.isEmpty()) {
            throw new ConfigException(VARIABLE, "names no user: write postgresql://user@host/db or set WALHOOK_SOURCE_USER");
        }
        String effectivePassword = password.orElse(urlPassword);
        Map<String, String> parameters = new LinkedHashMap<>();
        if (uri.getRawQuery() != null && !uri.getRawQuery().isEmpty()) {
            // postgresql://app:2024/x?rest@db/orders: a password holding '?' made its rest the query, and what is
            // wrong there is not quoted (any pair of it: the password may hold '&' too); so too with user info found
            // before, when the password held an '@' before its '/' and '?' (app:Kx@9/Q?rest@db/orders)
            boolean mayHoldPassword = uri.getRawQuery().contains("@");
            for (String pair : uri.getRawQuery().split("&")) {
                String[] kv = pair.split("=", 2);
                String key = decode(kv[0]);
                if (!PARAMETERS.contains(key)) {
                    throw new ConfigException(VARIABLE, "has an unsupported parameter" + (mayHoldPassword ? "" : " '" + key + "'")
                            + "; supported: " + String.join(", ", new java.util.TreeSet<>(PARAMETERS))
                            + (mayHoldPassword ? " (percent-encode '/', '?', '#' and '@' in a password)" : ""));
                }
                String value = kv.length > 1 ? decode(kv[1]) : "";
                if (key.equals("sslmode") && !SSL_MODES.contains(value)) {
                    throw new ConfigException(VARIABLE, "has sslmode=" + (mayHoldPassword ? "(not shown)" : value)
                            + "; expected one of " + String.join(", ", new java.util.TreeSet<>(SSL_MODES))
                            + (mayHoldPassword ? " (percent-encode '/', '?', '#' and '@' in a password)" : ""));
                }
                parameters.put(key, value);
            }
        }
        if ("verify-full".equals(parameters.get("sslmode")) && UrlAuthority.underscoredHost(uri)) {
            throw new ConfigException(VARIABLE, "has sslmode=verify-full and " + UrlAuthority.noTlsCheck(host));
        }
        return new SourceUrl(host, port, database, effectiveUser, effectivePassword, parameters);
    }

    private static String decode(String s) {
        return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
    }

    /** For pgjdbc: credentials are passed apart, never in the URL. */
    public String jdbcUrl() {
        StringBuilder url = new StringBuilder("jdbc:postgresql://").append(hostForUrl()).append(':').append(port)
                .append('/').append(encode(database));
        char sep = '?';
        for (Map.Entry<String, String> p : parameters.entrySet()) {
            String key = p.getKey().equals("connect_timeout") ? "connectTimeout" : p.getKey().equals("application_name")
                    ? "ApplicationName" : p.getKey();
            url.append(sep).append(key).append('=').append(encode(p.getValue()));
            sep = '&';
        }
        return url.toString();
    }

    /**
     * For the Vert.x client, which reads libpq URIs; credentials are passed apart. The
     * {@code sslmode} is always given: without one, libpq and pgjdbc use TLS where the server
     * offers it ({@code prefer}), and the Vert.x client never would.
     */
    public String reactiveUrl() {
        return "postgresql://" + hostForUrl() + ':' + port + '/' + encode(database) + "?sslmode=" + sslMode();
    }

    /** The {@code sslmode} given, or libpq's and pgjdbc's default, {@code prefer}. */
    public String sslMode() {
        return parameters.getOrDefault("sslmode", "prefer");
    }

    /**
     * The CA certificates that sign the server's: {@code sslrootcert}, or libpq's and pgjdbc's
     * default file, {@code ~/.postgresql/root.crt}, where it exists.
     */
    public Optional<String> rootCertificate() {
        return file("sslrootcert", "root.crt");
    }

    /**
     * The certificate walhook presents to a server that asks for one: {@code sslcert}, or pgjdbc's
     * default file, {@code ~/.postgresql/postgresql.crt}, where it exists.
     */
    public Optional<String> clientCertificate() {
        return file("sslcert", "postgresql.crt");
    }

    /** The client certificate's key: {@code sslkey}, or pgjdbc's default file, {@code ~/.postgresql/postgresql.pk8}. */
    public Optional<String> clientKey() {
        return file("sslkey", "postgresql.pk8");
    }

    private Optional<String> file(String parameter, String defaultName) {
        String given = parameters.get(parameter);
        if (given != null) {
            return Optional.of(given);
        }
        java.nio.file.Path fallback = java.nio.file.Path.of(System.getProperty("user.home"), ".postgresql", defaultName);
        return java.nio.file.Files.isReadable(fallback) ? Optional.of(fallback.toString()) : Optional.empty();
    }

    private String hostForUrl() {
        return host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host;
    }

    private static String encode(String s) {
        return java.net.URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
    }

    @Override
    public String toString() {
        return "postgresql://" + user + "@" + hostForUrl() + ":" + port + "/" + database;
    }
}
