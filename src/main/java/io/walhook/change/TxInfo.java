package io.walhook.change;

import java.time.Instant;

import io.walhook.pgoutput.Lsn;

/**
 * The transaction an event belongs to, as known from its Begin (or Stream Commit). Its end LSN,
 * the position to acknowledge, arrives with the Commit. A non-transactional logical message forms
 * a transaction of its own: commit LSN = the message's LSN, xid 0, no commit time.
 */
public record TxInfo(long xid, Lsn commitLsn, Instant commitTime) {
}
