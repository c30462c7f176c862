package io.walhook.change;

/**
 * Reads PostgreSQL's array text form ({@code array_out}) into a flat list of tokens, unescaping
 * element text in place.
 *
 * <pre>
 * {1,2,NULL}                 three elements, the last one SQL NULL
 * {"NULL","",a b}            the string NULL (quoted), an empty string, and "a b"
 * {"a\"b","c\\d"}            quotes and backslashes escaped inside double quotes
 * {{1,2},{3,4}}              a two-dimensional array
 * [0:1]={1,2}                explicit bounds, printed when a lower bound is not 1 (dropped here)
 * {(1,1),(0,0);(2,2),(1,1)}  box[]: the element type's delimiter (typdelim) is ';'
 * </pre>
 *
 * <p>The rules are those of {@code array_in}, which accepts more than {@code array_out} prints:
 * whitespace around elements and braces, backslash escapes outside quotes; an unquoted element
 * equal to {@code NULL} in any case is SQL NULL, while a quoted or escaped one is a string.
 *
 * <p>Parsing finishes before anything is written, so a malformed text (which PostgreSQL never
 * sends) can still be written as a plain string instead of leaving half an array in the output.
 * One instance is reused for every value of one thread.
 */
final class PgArrayParser {

    /** Token types; each token is three ints: type, start, length (start and length only for {@link #ELEMENT}). */
    static final int START = 0;
    static final int END = 1;
    static final int NULL = 2;
    static final int ELEMENT = 3;

    /** Deeper nesting than PostgreSQL's MAXDIM (6) is not an array it printed. */
    private static final int MAX_DEPTH = 6;

    private int[] tokens = new int[96];
    private int count;

    /** The tokens of the last successful {@link #parse}: {@code tokens()[3 * i]} is the type of token {@code i}. */
    int[] tokens() {
        return tokens;
    }

    /**
     * Parses {@code text[offset, offset + length)}, rewriting element text in place (unescaped
     * text is never longer than its source), and returns the number of tokens, or -1 when the text
     * is not an array literal.
     */
    int parse(char[] text, int offset, int length, char delimiter) {
        count = 0;
        int end = offset + length;
        int p = skipSpace(text, offset, end);
        if (p < end && text[p] == '[') {
            p = skipBounds(text, p, end);
            if (p < 0) {
                return -1;
            }
            p = skipSpace(text, p, end);
        }
        if (p >= end || text[p] != '{') {
            return -1;
        }
        int write = offset;
        int depth = 0;
        boolean expectElement = true;
        boolean justOpened = false;
        while (true) {
            p = skipSpace(text, p, end);
            if (p >= end) {
                return -1;
            }
            char c = text[p];
            if (c == '{') {
                if (!expectElement || depth == MAX_DEPTH) {
                    return -1;
                }
                add(START, 0, 0);
                depth++;
                p++;
                justOpened = true;
            } else if (c == '}') {
                if (expectElement && !justOpened) {
                    return -1;
                }
                add(END, 0, 0);
                depth--;
                p++;
                expectElement = false;
                justOpened = false;
                if (depth == 0) {
                    break;
                }
            } else if (c == delimiter) {
                if (expectElement) {
                    return -1;
                }
                p++;
                expectElement = true;
                justOpened = false;
            } else {
                if (!expectElement || depth == 0) {
                    return -1;
                }
                int start = write;
                if (c == '"') {
                    p++;
                    while (true) {
                        if (p >= end) {
                            return -1;
                        }
                        char q = text[p++];
                        if (q == '"') {
                            break;
                        }
                        if (q == '\\') {
                            if (p >= end) {
                                return -1;
                            }
                            q = text[p++];
                        }
                        text[write++] = q;
                    }
                    add(ELEMENT, start, write - start);
                } else {
                    boolean escaped = false;
                    int contentEnd = write;
                    while (p < end) {
                        char q = text[p];
                        if (q == delimiter || q == '}') {
                            break;
                        }
                        if (q == '{' || q == '"') {
                            return -1;
                        }
                        p++;
                        if (q == '\\') {
                            if (p >= end) {
                                return -1;
                            }
                            text[write++] = text[p++];
                            escaped = true;
                            contentEnd = write;
                        } else {
                            text[write++] = q;
                            if (!isSpace(q)) {
                                contentEnd = write;
                            }
                        }
                    }
                    write = contentEnd;
                    int n = write - start;
                    if (n == 0) {
                        return -1;
                    }
                    if (!escaped && n == 4 && isNull(text, start)) {
                        add(NULL, 0, 0);
                    } else {
                        add(ELEMENT, start, n);
                    }
                }
                expectElement = false;
                justOpened = false;
            }
        }
        return skipSpace(text, p, end) == end ? count : -1;
    }

    private void add(int type, int start, int length) {
        int at = count * 3;
        if (at + 3 > tokens.length) {
            int[] grown = new int[ConverterBuffers.grown(tokens.length, at + 3)];
            System.arraycopy(tokens, 0, grown, 0, at);
            tokens = grown;
        }
        tokens[at] = type;
        tokens[at + 1] = start;
        tokens[at + 2] = length;
        count++;
    }

    /** Lets go of a token buffer that one huge array grew past the retention limit. */
    void trim() {
        if (tokens.length > ConverterBuffers.RETAIN_LIMIT) {
            tokens = new int[96];
        }
    }

    /** Skips {@code [lower:upper]} groups and the {@code =} after them; returns the index after {@code =} or -1. */
    private static int skipBounds(char[] text, int p, int end) {
        while (p < end && text[p] == '[') {
            int close = p + 1;
            while (close < end && text[close] != ']') {
                char c = text[close];
                if (!(c >= '0' && c <= '9') && c != ':' && c != '-' && c != '+' && !isSpace(c)) {
                    return -1;
                }
                close++;
            }
            if (close >= end) {
                return -1;
            }
            p = skipSpace(text, close + 1, end);
        }
        return p < end && text[p] == '=' ? p + 1 : -1;
    }

    private static boolean isNull(char[] text, int at) {
        return (text[at] == 'N' || text[at] == 'n') && (text[at + 1] == 'U' || text[at + 1] == 'u')
                && (text[at + 2] == 'L' || text[at + 2] == 'l') && (text[at + 3] == 'L' || text[at + 3] == 'l');
    }

    private static int skipSpace(char[] text, int p, int end) {
        while (p < end && isSpace(text[p])) {
            p++;
        }
        return p;
    }

    /** {@code scanner_isspace}: the whitespace {@code array_in} skips. */
    private static boolean isSpace(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == 0x0B;
    }
}
