package io.walhook.config;

import java.util.Optional;
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
        refusePlaceholder("WALHOOK_API_TOKEN", config.apiToken());
        refusePlaceholder("WALHOOK_API_READ_TOKEN", config.apiReadToken());
        return source;
    }

    /**
     * An API token left as an example's placeholder ({@code CHANGE_ME}) is one anyone can read in
     * the example: it would open the API, writes included, to them.
     */
    private static void refusePlaceholder(String variable, Optional<String> token) {
        String normalized = token.orElse("").toLowerCase(java.util.Locale.ROOT).replace('-', '_').replace(' ', '_');
        if (normalized.contains("change_me") || normalized.contains("changeme")) {
            throw new ConfigException(variable, "is a placeholder (it says change me): set a token of your own,"
                    + " e.g. the output of openssl rand -hex 32");
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
