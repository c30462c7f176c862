package io.walhook.change;

import java.time.DateTimeException;
import java.time.LocalDateTime;

/**
 * Rewrites PostgreSQL's ISO-style date/time output ({@code DateStyle=ISO}) as ISO 8601.
 *
 * <pre>
 * timestamptz  2026-11-29 16:00:00.123456+00     -> 2026-11-29T16:00:00.123456Z
 *              2026-11-29 21:30:00.5+05:30       -> 2026-11-29T16:00:00.5Z     (normalized to UTC)
 * timestamp    2026-11-29 16:00:00.123456        -> 2026-11-29T16:00:00.123456
 * date         2026-11-29                        -> 2026-11-29
 * BC           0044-03-15 12:00:00+00 BC         -> -0043-03-15T12:00:00Z
 * far future   10000-01-01                       -> +10000-01-01
 * </pre>
 *
 * <p><b>Years.</b> PostgreSQL counts years 1 BC, 1 AD with no year zero and marks the former with a
 * trailing {@code BC}; ISO 8601 numbers them astronomically: 1 BC is year {@code 0000}, 2 BC is
 * {@code -0001}, 44 BC is {@code -0043}. Years before 0000 take a minus sign and years past 9999 a
 * plus sign (ISO 8601's expanded form, written as {@code java.time} writes and parses it, for
 * example by {@code Instant.parse}). The fractional second keeps PostgreSQL's digits (trailing
 * zeros already dropped); no digits are invented.
 *
 * <p><b>Zones.</b> walhook pins {@code TimeZone=UTC}, so a timestamptz arrives as {@code +00} and is
 * rewritten without arithmetic. Any other offset ({@code +05:30}, or {@code +05:53:28} for a local
 * mean time before standard zones) is subtracted to reach UTC, so the output is right even when the
 * session setting did not take.
 *
 * <p>{@code infinity}, {@code -infinity} and anything not in the expected shape return -1: the caller
 * writes PostgreSQL's text unchanged.
 */
final class PgDateTimes {

    private static final int DATE = 0;
    private static final int TIMESTAMP = 1;
    private static final int TIMESTAMPTZ = 2;

    /** Longer input than this is not a date/time PostgreSQL printed (294276-12-31 23:59:59.999999+05:53:28 BC is 38). */
    private static final int MAX_INPUT = 48;

    private PgDateTimes() {
    }

    /** A {@code timestamptz} as ISO 8601 in UTC with {@code Z}; the output length, or -1 to write the input as it is. */
    static int timestampWithZone(char[] in, int offset, int length, char[] out) {
        return convert(in, offset, length, out, TIMESTAMPTZ);
    }

    /** A {@code timestamp} as an ISO 8601 local date-time; the output length, or -1 to write the input as it is. */
    static int timestamp(char[] in, int offset, int length, char[] out) {
        return convert(in, offset, length, out, TIMESTAMP);
    }

    /** A {@code date} as an ISO 8601 calendar date; the output length, or -1 to write the input as it is. */
    static int date(char[] in, int offset, int length, char[] out) {
        return convert(in, offset, length, out, DATE);
    }

    private static int convert(char[] in, int offset, int length, char[] out, int shape) {
        if (length > MAX_INPUT) {
            return -1;
        }
        int end = offset + length;
        int p = offset;
        while (p < end && isDigit(in[p])) {
            p++;
        }
        int yearDigits = p - offset;
        if (yearDigits < 4 || yearDigits > 9) {
            return -1;
        }
        long year = 0;
        for (int i = offset; i < p; i++) {
            year = year * 10 + (in[i] - '0');
        }
        int month = twoDigitsAfter(in, p, end, '-');
        int day = twoDigitsAfter(in, p + 3, end, '-');
        if (month < 1 || month > 12 || day < 1 || day > 31) {
            return -1;
        }
        p += 6;
        int hour = 0;
        int minute = 0;
        int second = 0;
        int fractionStart = 0;
        int fractionLength = 0;
        int offsetSeconds = 0;
        if (shape != DATE) {
            hour = twoDigitsAfter(in, p, end, ' ');
            minute = twoDigitsAfter(in, p + 3, end, ':');
            second = twoDigitsAfter(in, p + 6, end, ':');
            if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 60) {
                return -1;
            }
            p += 9;
            if (p < end && in[p] == '.') {
                fractionStart = ++p;
                while (p < end && isDigit(in[p])) {
                    p++;
                }
                fractionLength = p - fractionStart;
                if (fractionLength == 0 || fractionLength > 9) {
                    return -1;
                }
            }
            if (shape == TIMESTAMPTZ) {
                if (p >= end || (in[p] != '+' && in[p] != '-')) {
                    return -1;
                }
                int sign = in[p] == '-' ? -1 : 1;
                int hours = twoDigits(in, p + 1, end);
                int minutes = 0;
                int seconds = 0;
                p += 3;
                if (p < end && in[p] == ':') {
                    minutes = twoDigitsAfter(in, p, end, ':');
                    p += 3;
                    if (p < end && in[p] == ':') {
                        seconds = twoDigitsAfter(in, p, end, ':');
                        p += 3;
                    }
                }
                if (hours < 0 || minutes < 0 || seconds < 0) {
                    return -1;
                }
                offsetSeconds = sign * (hours * 3600 + minutes * 60 + seconds);
            }
        }
        boolean bc = false;
        if (end - p == 3 && in[p] == ' ' && in[p + 1] == 'B' && in[p + 2] == 'C') {
            bc = true;
            p += 3;
        }
        if (p != end) {
            return -1;
        }
        long isoYear = bc ? 1 - year : year;
        if (offsetSeconds != 0) {
            try {
                LocalDateTime utc = LocalDateTime.of((int) isoYear, month, day, hour, minute, second)
                        .minusSeconds(offsetSeconds);
                isoYear = utc.getYear();
                month = utc.getMonthValue();
                day = utc.getDayOfMonth();
                hour = utc.getHour();
                minute = utc.getMinute();
                second = utc.getSecond();
            } catch (DateTimeException e) {
                return -1;
            }
        }
        int o = writeYear(out, isoYear);
        out[o++] = '-';
        o = writeTwoDigits(out, o, month);
        out[o++] = '-';
        o = writeTwoDigits(out, o, day);
        if (shape == DATE) {
            return o;
        }
        out[o++] = 'T';
        o = writeTwoDigits(out, o, hour);
        out[o++] = ':';
        o = writeTwoDigits(out, o, minute);
        out[o++] = ':';
        o = writeTwoDigits(out, o, second);
        if (fractionLength > 0) {
            out[o++] = '.';
            System.arraycopy(in, fractionStart, out, o, fractionLength);
            o += fractionLength;
        }
        if (shape == TIMESTAMPTZ) {
            out[o++] = 'Z';
        }
        return o;
    }

    private static int writeYear(char[] out, long year) {
        int o = 0;
        long magnitude = year;
        if (year < 0) {
            out[o++] = '-';
            magnitude = -year;
        } else if (year > 9999) {
            out[o++] = '+';
        }
        int digits = 4;
        for (long rest = magnitude / 10000; rest > 0; rest /= 10) {
            digits++;
        }
        for (int i = digits - 1; i >= 0; i--) {
            out[o + i] = (char) ('0' + magnitude % 10);
            magnitude /= 10;
        }
        return o + digits;
    }

    private static int writeTwoDigits(char[] out, int o, int value) {
        out[o] = (char) ('0' + value / 10);
        out[o + 1] = (char) ('0' + value % 10);
        return o + 2;
    }

    /** The two digits after {@code separator} at {@code p}, or -1. */
    private static int twoDigitsAfter(char[] in, int p, int end, char separator) {
        if (p >= end || in[p] != separator) {
            return -1;
        }
        return twoDigits(in, p + 1, end);
    }

    private static int twoDigits(char[] in, int p, int end) {
        if (p + 2 > end) {
            return -1;
        }
        if (!isDigit(in[p]) || !isDigit(in[p + 1])) {
            return -1;
        }
        return (in[p] - '0') * 10 + (in[p + 1] - '0');
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }
}
