package io.walhook.source;

import io.walhook.pgoutput.Lsn;

/** What the replication reader is doing, for health checks, /status and metrics. */
public record SourceStatus(State state, String lastError, Lsn received, Lsn acknowledged, int pendingTransactions,
        int openStreams, long spilledTransactions, long events) {

    public enum State {
        /** Not started yet, or between attempts. */
        CONNECTING,
        /** START_REPLICATION succeeded; changes flow. */
        STREAMING,
        /** The connection failed; reconnecting with backoff. */
        DISCONNECTED,
        /** The slot is gone or invalidated: changes were lost to it; an operator must act. */
        SLOT_INVALID,
        STOPPED
    }
}
