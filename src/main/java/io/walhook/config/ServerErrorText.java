package io.walhook.config;

import java.sql.SQLException;
import java.util.Locale;
import java.util.Set;

import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * What of a PostgreSQL error may be shown where its reader is not the operator: a backfill's
 * {@code error} in the API, which every holder of the read token sees. The server's full text can
 * quote the rows it read: its {@code Detail} ({@code Key (id)=(42) already exists}, {@code Failing
 * row contains (...)}), its {@code Where} (a function's arguments), and values in the message itself
 * ({@code invalid input syntax for type integer: "123-45-6789"}). Shown is the primary message
 * alone, on one line, with every double-quoted text replaced by {@code "…"} but the names of things
 * ({@code relation "orders"}, {@code column "n"}), then the SQLSTATE; cut at 500 characters. A value
 * holding quotes itself (JSON, an array literal) is not escaped by PostgreSQL: from the first quote
 * that opens no name to the message's last quote, all of it is taken as the value. The words of an
 * error a function raised ({@code RAISE EXCEPTION 'no access to %', row.email} in a row security
 * policy's function, an {@code ASSERT}) are its author's, values unquoted among them: left out.
 */
public final class ServerErrorText {

    /** The longest text shown; the rest is cut off. */
    static final int LENGTH = 500;

    /** The words PostgreSQL puts before a quoted name, not a value. */
    private static final Set<String> NAMES = Set.of("relation", "table", "column", "schema", "function", "procedure",
            "type", "constraint", "index", "publication", "role", "policy", "sequence", "view", "trigger", "database",
            "operator", "collation", "extension", "attribute", "slot", "tablespace", "domain", "cursor", "statement",
            "parameter", "aggregate", "rule", "subscription", "user", "language", "server", "conversion", "family",
            "class", "partition", "enum");

    /** PL/pgSQL's routines that raise an error with its author's words: RAISE and ASSERT. */
    private static final Set<String> RAISED = Set.of("exec_stmt_raise", "exec_stmt_assert");

    private ServerErrorText() {
    }

    /** The error as it may be shown: its primary message, quoting names only, and its SQLSTATE. */
    public static String of(SQLException e) {
        ServerErrorMessage server = e instanceof PSQLException p ? p.getServerErrorMessage() : null;
        String message = server != null && server.getMessage() != null ? server.getMessage()
                : e.getMessage() == null ? "" : e.getMessage().lines().findFirst().orElse("");
        if (server != null && RAISED.contains(String.valueOf(server.getRoutine()))
                || "P0001".equals(e.getSQLState()) || "P0004".equals(e.getSQLState())) {
            message = "a function raised an error (its words are left out, as they may quote a row; the server's log"
                    + " has them)";
        }
        StringBuilder shown = new StringBuilder(Math.min(message.length(), LENGTH) + 24);
        int at = 0;
        while (at < message.length()) {
            int open = message.indexOf('"', at);
            int close = open < 0 ? -1 : message.indexOf('"', open + 1);
            if (close < 0) {
                shown.append(message, at, message.length());
                break;
            }
            shown.append(message, at, open);
            if (!afterAName(message, open)) {
                // a value: PostgreSQL does not escape the quotes inside it (JSON, an array literal), so it may end at
                // any quote after this one; the rest of the message, up to its last quote, is taken as the value
                shown.append("\"…\"");
                int last = message.lastIndexOf('"');
                at = last + 1;
                continue;
            }
            shown.append(message, open, close + 1);
            at = close + 1;
        }
        StringBuilder line = new StringBuilder(shown.length());
        shown.codePoints().forEach(c -> line.appendCodePoint(Character.isISOControl(c) ? ' ' : c));
        String cut = line.length() <= LENGTH ? line.toString()
                : line.substring(0, Character.isHighSurrogate(line.charAt(LENGTH - 4)) ? LENGTH - 4 : LENGTH - 3) + "...";
        return e.getSQLState() == null ? cut : cut + " (SQLSTATE " + e.getSQLState() + ")";
    }

    /** Whether the quote opening at {@code open} follows one of the words that name a thing. */
    private static boolean afterAName(String message, int open) {
        int end = open;
        while (end > 0 && message.charAt(end - 1) == ' ') {
            end--;
        }
        int start = end;
        while (start > 0 && Character.isLetter(message.charAt(start - 1))) {
            start--;
        }
        return start < end && NAMES.contains(message.substring(start, end).toLowerCase(Locale.ROOT));
    }
}
