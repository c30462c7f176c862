package io.walhook.testing;

/** The test harness could not give a test the server it asked for; the message says exactly why. */
public final class HarnessException extends RuntimeException {

    public HarnessException(String message) {
        super(message);
    }

    public HarnessException(String message, Throwable cause) {
        super(message, cause);
    }
}
