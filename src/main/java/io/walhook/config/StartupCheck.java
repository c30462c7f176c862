package io.walhook.config;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

import jakarta.annotation.Priority;
import jakarta.enterprise.event.Observes;
import jakarta.enterprise.inject.Instance;
import jakarta.inject.Inject;
import jakarta.inject.Singleton;

import org.jboss.logging.Logger;

import io.agroal.api.AgroalDataSource;
import io.quarkus.runtime.PreventFurtherStepsException;
import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.StartupEvent;

/**
 * Validates the configuration before anything connects, then brings walhook's own schema up to
 * date. A bad value stops start-up with one line naming the variable.
 */
@Singleton
public class StartupCheck {

    private static final Logger LOG = Logger.getLogger(StartupCheck.class);
    /** Replication slot names: lower-case letters, digits and underscores (PostgreSQL's rule). */
    private static final Pattern SLOT = Pattern.compile("[a-z0-9_]{1,63}");
    /**
     * Publication and schema names: lower case, as PostgreSQL folds the unquoted names walhook's
     * SQL uses (an upper-case schema would be created quoted and then not found).
     */
    private static final Pattern IDENTIFIER = Pattern.compile("[a-z_][a-z0-9_$]{0,62}");
    private static final Pattern TABLE = Pattern.compile("[A-Za-z_][A-Za-z0-9_$]{0,62}\\.[A-Za-z_][A-Za-z0-9_$]{0,62}");

    /** The exit status of a start-up stopped by configuration (sysexits' EX_CONFIG). */
    public static final int EXIT_CONFIG = 78;
    /** How long a database that went away while the schema was set up is waited for. */
    public static final java.time.Duration RESTART_PATIENCE = java.time.Duration.ofSeconds(60);

    private final WalhookConfig config;
    /** An Instance: the datasource is inactive until the URL is valid. */
    private final Instance<AgroalDataSource> dataSource;

    @Inject
    public StartupCheck(WalhookConfig config, Instance<AgroalDataSource> dataSource) {
        this.config = config;
        this.dataSource = dataSource;
    }

    void onStart(@Observes @Priority(10) StartupEvent event) {
        SourceUrl source;
        try {
            environment(System.getenv());
            dotEnv(org.eclipse.microprofile.config.ConfigProvider.getConfig().getConfigSources());
            source = validate(config);
        } catch (ConfigException problem) {
            throw stop(problem);
        }
        long deadline = System.nanoTime() + RESTART_PATIENCE.toNanos();
        for (int attempt = 1; ; attempt++) {
            try {
                SchemaMigrations.migrate(dataSource.get(), config.stateSchema());
                break;
            } catch (RuntimeException | java.sql.SQLException e) {
                if (tls(e)) {
                    throw stop(new ConfigException(SourceUrl.VARIABLE, "points at " + source + " whose TLS walhook"
                            + " does not accept (sslmode=" + source.sslMode() + "): " + firstLine(e)
                            + "; check the server's certificate against sslmode and sslrootcert"));
                }
                if (!restarting(e, attempt) || System.nanoTime() - deadline > 0) {
                    throw stop(new ConfigException(SourceUrl.VARIABLE, "points at " + source
                            + " where walhook cannot set up its schema '" + config.stateSchema() + "': " + firstLine(e)));
                }
                if (attempt == 1) {
                    LOG.warnf("the database at %s went away while walhook set up its schema (%s); trying again for up to %s",
                            source, firstLine(e), RESTART_PATIENCE);
                }
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                    throw stop(new ConfigException(SourceUrl.VARIABLE, "start-up interrupted"));
                }
            }
        }
        LOG.infof("walhook ready: source %s, slot %s, publication %s, state schema %s", source, config.slot(),
                config.publication().name(), config.stateSchema());
    }

    /** Every check that needs no network; throws the first {@link ConfigException}. */
    public static SourceUrl validate(WalhookConfig config) {
        // an empty value is no value; one of blanks only was read as set in one place and as unset in another
        refuseBlank("WALHOOK_SOURCE_USER", config.source().user());
        refuseBlank("WALHOOK_AMQP_URL", config.amqpUrl());
        refuseBlank("WALHOOK_API_TOKEN", config.apiToken());
        refuseBlank("WALHOOK_API_READ_TOKEN", config.apiReadToken());
        refuseBlank("WALHOOK_SOURCE_SPILL_DIRECTORY", config.source().spillDirectory());
        SourceUrl source = SourceUrl.parse(config.source().url(), config.source().user(), config.source().password());
        if (!SLOT.matcher(config.slot()).matches()) {
            throw new ConfigException("WALHOOK_SLOT", "'" + config.slot()
                    + "' is not a replication slot name: use 1 to 63 lower-case letters, digits and underscores");
        }
        if (!IDENTIFIER.matcher(config.publication().name()).matches()) {
            throw new ConfigException("WALHOOK_PUBLICATION", "'" + config.publication().name()
                    + "' is not a plain identifier: use lower-case letters, digits and underscores, 63 at most");
        }
        if (!IDENTIFIER.matcher(config.stateSchema()).matches()) {
            throw new ConfigException("WALHOOK_STATE_SCHEMA", "'" + config.stateSchema()
                    + "' is not a plain identifier: use lower-case letters, digits and underscores, 63 at most");
        }
        String tables = config.publication().tables().strip();
        if (!tables.equals("*")) {
            for (String table : tables.split(",", -1)) {
                if (!TABLE.matcher(table.strip()).matches()) {
                    throw new ConfigException("WALHOOK_PUBLICATION_TABLES", "has '" + table.strip()
                            + "'; expected * or a comma list of schema.table");
                }
            }
        }
        config.amqpUrl().filter(url -> !url.isBlank()).ifPresent(AmqpUrl::parse);
        refuseUnusableToken("WALHOOK_API_TOKEN", config.apiToken());
        refuseUnusableToken("WALHOOK_API_READ_TOKEN", config.apiReadToken());
        if (config.apiReadToken().filter(t -> !t.isBlank()).isPresent()
                && config.apiReadToken().map(String::strip).equals(config.apiToken().map(String::strip))) {
            // the write token is checked first: a dashboard given the "read" token could create and delete
            throw new ConfigException("WALHOOK_API_READ_TOKEN", "is the same as WALHOOK_API_TOKEN, which would let every"
                    + " holder of it write; give it a value of its own, or leave it unset");
        }
        config.source().spillDirectory().filter(d -> !d.isBlank()).ifPresent(StartupCheck::spillDirectory);
        return source;
    }

    /**
     * The spill directory can take files: it was first used at the first transaction larger than the
     * stream's memory, whose failure broke the stream, and the one after, again, for good.
     */
    private static void spillDirectory(String directory) {
        java.nio.file.Path path = java.nio.file.Path.of(directory);
        try {
            java.nio.file.Files.createDirectories(path);
            java.nio.file.Files.delete(java.nio.file.Files.createTempFile(path, "walhook-check", ".spill"));
        } catch (java.nio.file.FileAlreadyExistsException e) {
            throw new ConfigException("WALHOOK_SOURCE_SPILL_DIRECTORY", "is " + directory + ", which is a file, not a"
                    + " directory");
        } catch (java.io.IOException | RuntimeException e) {
            throw new ConfigException("WALHOOK_SOURCE_SPILL_DIRECTORY", "is " + directory + ", where walhook cannot write"
                    + " files (" + e + ")");
        }
    }

    /** Every {@code WALHOOK_*} variable walhook reads but those of a subscription ({@link #SUBSCRIPTION_FIELDS}). */
    static final Set<String> SETTINGS = Set.of("WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "WALHOOK_AMQP_URL",
            "WALHOOK_API_READ_TOKEN", "WALHOOK_API_TOKEN", "WALHOOK_BACKFILL_CHUNK_TARGET",
            "WALHOOK_BACKFILL_STATEMENT_TIMEOUT", "WALHOOK_DELIVERY_CONCURRENCY", "WALHOOK_DELIVERY_MAX_BACKOFF",
            "WALHOOK_DELIVERY_MEMORY_BYTES", "WALHOOK_DELIVERY_PARKED_RETRY_INTERVAL", "WALHOOK_DELIVERY_REQUEST_TIMEOUT",
            "WALHOOK_DELIVERY_RETRY_WINDOW", "WALHOOK_PUBLICATION", "WALHOOK_PUBLICATION_TABLES",
            "WALHOOK_SHUTDOWN_GRACE_PERIOD", "WALHOOK_SLOT", "WALHOOK_SOURCE_CHECKPOINT_INTERVAL",
            "WALHOOK_SOURCE_HANDOFF_BYTES", "WALHOOK_SOURCE_HANDOFF_CAPACITY", "WALHOOK_SOURCE_PASSWORD",
            "WALHOOK_SOURCE_RECONNECT_MAX_BACKOFF", "WALHOOK_SOURCE_SPILL_DIRECTORY", "WALHOOK_SOURCE_STATUS_INTERVAL",
            "WALHOOK_SOURCE_STREAM_MEMORY_BYTES", "WALHOOK_SOURCE_URL", "WALHOOK_SOURCE_USER",
            "WALHOOK_STANDBY_POLL_INTERVAL", "WALHOOK_STATE_SCHEMA");

    /** The settings of a configured subscription: {@code WALHOOK_SUBSCRIPTIONS_<NAME>_<FIELD>}. */
    static final Set<String> SUBSCRIPTION_FIELDS = Set.of("AMQP_ADDRESS", "BACKFILL", "BATCH_MAX_EVENTS",
            "BATCH_MAX_WAIT_MS", "EXCLUDE_COLUMNS", "FILTER", "FORMAT", "INCLUDE_COLUMNS", "MAX_IN_FLIGHT", "OPERATIONS",
            "RATE_LIMIT", "RETRY_MAX_ATTEMPTS", "RETRY_MAX_BACKOFF", "RETRY_WINDOW", "SECRET", "TABLES", "URL");

    private static final String SUBSCRIPTIONS = "WALHOOK_SUBSCRIPTIONS_";
    /**
     * What Kubernetes gives every pod for each Service of the namespace (service links, on unless
     * the pod turns them off): for a Service named walhook (or walhook-db...), WALHOOK_SERVICE_HOST,
     * WALHOOK_SERVICE_PORT[_HTTP], WALHOOK_PORT, WALHOOK_PORT_8080_TCP[_PROTO|_PORT|_ADDR].
     */
    private static final Pattern SERVICE_LINK = Pattern.compile(
            "WALHOOK(_[A-Z0-9_]+)?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)");
    private static final Pattern SUBSCRIPTION_NAME = Pattern.compile("[A-Z][A-Z0-9]{0,62}");

    /**
     * The process environment's {@code WALHOOK_*} variables, each one walhook reads: a name it
     * does not know (a typo, {@code _TABLE} for {@code _TABLES}, {@code _FILTERS}) was ignored, and
     * the subscription it was meant for went out with every table or every row. So was a
     * subscription's setting set empty ({@code FILTER=} from a template whose value was missing):
     * Quarkus reads an empty value as unset. Both stop the start, naming the variable.
     */
    static void environment(Map<String, String> env) {
        environment(env, variable -> variable);
    }

    /**
     * The {@code WALHOOK_*} names of the {@code .env} file Quarkus reads in the working directory,
     * checked as the environment's are: a mistyped one there was ignored without a word.
     */
    static void dotEnv(Iterable<org.eclipse.microprofile.config.spi.ConfigSource> sources) {
        for (org.eclipse.microprofile.config.spi.ConfigSource source : sources) {
            // SmallRye's, for the working directory's file: EnvConfigSource[source=file:/.../.env]
            String name = String.valueOf(source.getName());
            if (source instanceof io.smallrye.config.EnvConfigSource && name.endsWith("/.env]")) {
                environment(source.getProperties(), variable -> variable + " (in .env)");
            }
        }
    }

    private static void environment(Map<String, String> env, java.util.function.UnaryOperator<String> named) {
        for (String variable : new java.util.TreeSet<>(env.keySet())) {
            if (!variable.startsWith("WALHOOK_") || SETTINGS.contains(variable)
                    || variable.startsWith("WALHOOK_TEST_") || variable.startsWith("WALHOOK_BENCH_")
                    || SERVICE_LINK.matcher(variable).matches()) {
                continue; // the project's own test and benchmark tools; Kubernetes' variables of a Service walhook*
            }
            if (variable.startsWith(SUBSCRIPTIONS)) {
                String rest = variable.substring(SUBSCRIPTIONS.length());
                String field = SUBSCRIPTION_FIELDS.stream().filter(f -> rest.endsWith("_" + f))
                        .max(java.util.Comparator.comparingInt(String::length)).orElse(null);
                if (field != null) {
                    String name = rest.substring(0, rest.length() - field.length() - 1);
                    if (!SUBSCRIPTION_NAME.matcher(name).matches()) {
                        throw new ConfigException(named.apply(variable), "names subscription '" + name + "': a subscription's name is"
                                + " a letter, then letters and digits (63 at most), as in WALHOOK_SUBSCRIPTIONS_ORDERS_URL");
                    }
                    if (env.get(variable).isBlank()) {
                        throw new ConfigException(named.apply(variable), "is empty: give it a value, or leave it unset for its default");
                    }
                    continue;
                }
            }
            throw new ConfigException(named.apply(variable), "is not a walhook setting" + suggestion(variable)
                    + "; README.md's Configuration table lists them");
        }
    }

    /** The known setting closest to a mistyped one, when one is close. */
    private static String suggestion(String variable) {
        String best = null;
        int bestDistance = 4;
        List<String> known = new java.util.ArrayList<>(SETTINGS);
        if (variable.startsWith(SUBSCRIPTIONS)) {
            String rest = variable.substring(SUBSCRIPTIONS.length());
            int underscore = rest.indexOf('_');
            if (underscore > 0) {
                String name = rest.substring(0, underscore);
                SUBSCRIPTION_FIELDS.forEach(f -> known.add(SUBSCRIPTIONS + name + "_" + f));
            }
        }
        for (String candidate : known) {
            int distance = distance(variable, candidate);
            if (distance < bestDistance) {
                bestDistance = distance;
                best = candidate;
            }
        }
        return best == null ? "" : " (did you mean " + best + "?)";
    }

    /** Levenshtein distance. */
    private static int distance(String a, String b) {
        int[] previous = new int[b.length() + 1];
        int[] current = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            previous[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            current[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int substitution = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                current[j] = Math.min(substitution, Math.min(previous[j], current[j - 1]) + 1);
            }
            int[] swap = previous;
            previous = current;
            current = swap;
        }
        return previous[b.length()];
    }

    /** A variable set to blanks only: neither a value nor unset (an empty value is unset). */
    private static void refuseBlank(String variable, Optional<String> value) {
        if (value.isPresent() && value.get().isBlank()) {
            throw new ConfigException(variable, "is blank (only white space): give it a value, or leave it unset");
        }
    }

    /**
     * An API token left as an example's placeholder ({@code CHANGE_ME}) is one anyone can read in
     * the example: it would open the API, writes included, to them.
     */
    private static void refuseUnusableToken(String variable, Optional<String> token) {
        String normalized = token.orElse("").toLowerCase(java.util.Locale.ROOT).replace('-', '_').replace(' ', '_');
        if (normalized.contains("change_me") || normalized.contains("changeme")) {
            throw new ConfigException(variable, "is a placeholder (it says change me): set a token of your own,"
                    + " e.g. the output of openssl rand -hex 32");
        }
        String value = token.orElse("").strip();
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c < 0x20 || c > 0x7e) {
                // an HTTP header carries bytes that clients and servers read as Latin-1 or ASCII: such a token never matches
                throw new ConfigException(variable, "holds a character that is not printable ASCII (at position " + (i + 1)
                        + "): a bearer token is sent in an HTTP header; use letters, digits and punctuation, e.g. the"
                        + " output of openssl rand -hex 32");
            }
        }
    }

    /**
     * One log line naming the variable, then exit {@value #EXIT_CONFIG}: thrown from a start-up
     * observer, the exception this returns makes Quarkus skip the remaining start-up steps without
     * a stack trace. It carries no message: the line is logged, and {@link WalhookMain} reports a
     * stop that carries one (Quarkus's own) itself.
     */
    public static PreventFurtherStepsException stop(ConfigException problem) {
        LOG.error("walhook cannot start: " + problem.getMessage());
        Quarkus.asyncExit(EXIT_CONFIG);
        return new PreventFurtherStepsException(EXIT_CONFIG);
    }

    /**
     * Whether a failed schema set-up is the database restarting rather than a wrong setting: it shut
     * down, crashed or is starting up (57P01, 57P02, 57P03), or a connection it had made broke
     * (08003, 08006); after a first failure, a refused connection (08001) is the restart going on.
     * A connection refused at the first attempt is a wrong URL, reported at once.
     */
    public static boolean restarting(Throwable e, int attempt) {
        for (Throwable cause = e; cause != null; cause = cause.getCause() == cause ? null : cause.getCause()) {
            if (cause instanceof java.util.concurrent.TimeoutException) {
                return true; // the pool could not open a connection in time: a server starting, or too busy to answer
            }
            if (cause instanceof java.sql.SQLException sql && sql.getSQLState() != null) {
                String state = sql.getSQLState();
                if (state.startsWith("57P0") || state.equals("08003") || state.equals("08006")
                        || state.equals("08001") && attempt > 1) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * Whether the connection failed in its TLS handshake (a certificate not signed by the root
     * given, a host name it does not name): a setting, not a restart, however the driver classes it.
     */
    public static boolean tls(Throwable e) {
        for (Throwable cause = e; cause != null; cause = cause.getCause() == cause ? null : cause.getCause()) {
            if (cause instanceof javax.net.ssl.SSLException || cause instanceof java.security.cert.CertificateException
                    || cause instanceof java.sql.SQLException && cause.getMessage() != null
                    && (cause.getMessage().startsWith("SSL error") || cause.getMessage().contains("hostnameverifier"))) {
                return true;
            }
        }
        return false;
    }

    private static String firstLine(Throwable e) {
        // the deepest cause that says something: some carry no message (an EOFException when the server closed
        // the connection, the TimeoutException under the pool's "Acquisition timeout")
        Throwable root = e;
        String message = null;
        for (Throwable cause = e; cause != null; cause = cause.getCause() == cause ? null : cause.getCause()) {
            root = cause;
            if (cause.getMessage() != null) {
                message = cause.getMessage();
            }
        }
        message = message == null ? root.getClass().getSimpleName() : message;
        int newline = message.indexOf('\n');
        return newline < 0 ? message : message.substring(0, newline);
    }
}
