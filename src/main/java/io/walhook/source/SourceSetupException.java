package io.walhook.source;

/** The source database cannot be used as it is; the message says what to change. */
public final class SourceSetupException extends RuntimeException {

    public SourceSetupException(String message) {
        super(message);
    }

    public SourceSetupException(String message, Throwable cause) {
        super(message, cause);
    }
}
