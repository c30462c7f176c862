package io.walhook.routing;

/**
 * A subscription's filter that cannot be compiled: a syntax error, a type error, a result that is
 * not a boolean, or an expression over the size limits. The message is one line that starts with
 * {@code filter: } and names the problem and, when CEL knows it, the position, so it can go as is
 * into a start-up error or an API problem's detail.
 */
public final class CelFilterException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final int line;
    private final int column;

    CelFilterException(String message, int line, int column) {
        super(message);
        this.line = line;
        this.column = column;
    }

    CelFilterException(String message) {
        this(message, -1, -1);
    }

    /** The line of the first error, from 1; -1 when the error has no position. */
    public int line() {
        return line;
    }

    /** The column of the first error, from 1, in code points; -1 when the error has no position. */
    public int column() {
        return column;
    }
}
