package io.walhook.source;

import io.walhook.config.SourceUrl;

/**
 * The source database cannot be used as it is; the message says what to change, and
 * {@link #variable()} names the setting it is about (the source URL unless said otherwise).
 */
public final class SourceSetupException extends RuntimeException {

    private final String variable;

    public SourceSetupException(String message) {
        this(SourceUrl.VARIABLE, message, null);
    }

    public SourceSetupException(String message, Throwable cause) {
        this(SourceUrl.VARIABLE, message, cause);
    }

    public SourceSetupException(String variable, String message, Throwable cause) {
        super(message, cause);
        this.variable = variable;
    }

    /** A problem about another setting than the source URL (the slot, the publication). */
    public static SourceSetupException about(String variable, String message) {
        return new SourceSetupException(variable, message, null);
    }

    /** The environment variable the problem is about, for the one line that stops start-up. */
    public String variable() {
        return variable;
    }
}
