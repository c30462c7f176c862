package io.walhook.checkpoint;

import java.util.ArrayDeque;

import io.walhook.pgoutput.Lsn;

/**
 * Which WAL position may be acknowledged. Transactions are opened in commit order as the reader
 * meets them, gain one outstanding delivery per event handed to a destination, and are closed
 * with their end LSN at Commit; deliveries (or durable parking) count them down from any thread.
 * The watermark is the end LSN of the newest closed transaction such that it and every earlier
 * one have nothing outstanding: everything at or before it is delivered or parked.
 *
 * <p>Thread-safe. Each call is constant work apart from retiring finished transactions.
 */
public final class AckTracker {

    /** One transaction; its outstanding count goes up while open and down to zero. */
    public static final class Ticket {
        private final Lsn commitLsn;
        /** The commit position of the transaction opened before this one: the order's again if this one is abandoned. */
        private Lsn openedAfter = Lsn.INVALID;
        private Lsn endLsn;
        private long outstanding;
        private boolean abandoned;

        private Ticket(Lsn commitLsn) {
            this.commitLsn = commitLsn;
        }

        public Lsn commitLsn() {
            return commitLsn;
        }

        @Override
        public String toString() {
            return "transaction " + commitLsn + (endLsn == null ? " (open)" : " ending at " + endLsn)
                    + ", " + outstanding + " outstanding";
        }
    }

    /**
     * One delivery of a transaction to hand to a sender: run when it is delivered or parked.
     * Deliveries of one transaction that finish together are counted down in one step
     * ({@link #completeAll}).
     */
    public record Completion(AckTracker tracker, Ticket ticket) implements Runnable {
        @Override
        public void run() {
            tracker.complete(ticket, 1);
        }
    }

    /**
     * Runs these completions, counting runs of the same transaction down at once (a batch of a
     * lane is mostly one or a few transactions): one lock instead of one per event.
     */
    public static void completeAll(java.util.List<? extends Runnable> completions) {
        int i = 0;
        while (i < completions.size()) {
            Runnable done = completions.get(i);
            int next = i + 1;
            if (done instanceof Completion first) {
                while (next < completions.size() && completions.get(next) instanceof Completion c
                        && c.ticket == first.ticket && c.tracker == first.tracker) {
                    next++;
                }
                first.tracker.complete(first.ticket, next - i);
            } else {
                done.run();
            }
            i = next;
        }
    }

    private final ArrayDeque<Ticket> pending = new ArrayDeque<>();
    private Lsn watermark;
    private Lsn lastOpened = Lsn.INVALID;

    /** @param start the position already acknowledged (the persisted checkpoint), or {@link Lsn#INVALID} */
    public AckTracker(Lsn start) {
        this.watermark = start;
    }

    /**
     * Opens the next transaction in commit order.
     *
     * @throws IllegalArgumentException if its commit LSN is not after the previous one's
     */
    public synchronized Ticket open(Lsn commitLsn) {
        if (lastOpened.isValid() && commitLsn.compareTo(lastOpened) < 0) {
            throw new IllegalArgumentException("transaction committed at " + commitLsn + " opened after one committed at "
                    + lastOpened + ": transactions must be opened in commit order");
        }
        Ticket ticket = new Ticket(commitLsn);
        ticket.openedAfter = lastOpened;
        lastOpened = commitLsn;
        pending.addLast(ticket);
        return ticket;
    }

    /** Adds deliveries the transaction now awaits. */
    public synchronized void add(Ticket ticket, long deliveries) {
        if (deliveries < 0) {
            throw new IllegalArgumentException("deliveries cannot be negative: " + deliveries);
        }
        if ((ticket.endLsn != null || ticket.abandoned) && ticket.outstanding == 0) {
            throw new IllegalStateException(ticket + " is already complete");
        }
        ticket.outstanding += deliveries;
    }

    /** Closes the transaction at its end LSN: no more deliveries will be added. */
    public synchronized void close(Ticket ticket, Lsn endLsn) {
        if (ticket.endLsn != null) {
            throw new IllegalStateException(ticket + " is already closed");
        }
        ticket.endLsn = endLsn;
        advance();
    }

    /**
     * Gives up a transaction that will never be closed (its connection broke mid-way; the server
     * sends it again whole). Deliveries already handed on still count it down; it never moves the
     * watermark.
     */
    public synchronized void abandon(Ticket ticket) {
        if (ticket.endLsn != null) {
            throw new IllegalStateException(ticket + " is already closed");
        }
        ticket.abandoned = true;
        if (lastOpened.equals(ticket.commitLsn)) {
            // it may never come again (a standby promoted before it received it: its next transaction commits below
            // it); what is opened next follows the transaction before it
            lastOpened = ticket.openedAfter;
        }
        advance();
    }

    /** Records that {@code deliveries} of this transaction are delivered or durably parked. */
    public synchronized void complete(Ticket ticket, long deliveries) {
        if (deliveries > ticket.outstanding) {
            throw new IllegalStateException(ticket + ": cannot complete " + deliveries);
        }
        ticket.outstanding -= deliveries;
        advance();
    }

    /** Opens, fills and closes a transaction in one step. */
    public Ticket register(Lsn commitLsn, Lsn endLsn, long deliveries) {
        Ticket ticket = open(commitLsn);
        add(ticket, deliveries);
        close(ticket, endLsn);
        return ticket;
    }

    private void advance() {
        Ticket head;
        while ((head = pending.peekFirst()) != null && (head.endLsn != null || head.abandoned) && head.outstanding == 0) {
            pending.removeFirst();
            if (head.endLsn != null && head.endLsn.compareTo(watermark) > 0) {
                watermark = head.endLsn;
            }
        }
    }

    /** The newest end LSN with nothing outstanding at or before it. */
    public synchronized Lsn watermark() {
        return watermark;
    }

    /** True when every opened transaction is closed and complete. */
    public synchronized boolean idle() {
        return pending.isEmpty();
    }

    /**
     * True when no closed transaction has deliveries outstanding: the watermark is as far as what
     * was read can take it (only a transaction still open, or abandoned, may be pending).
     */
    public synchronized boolean settled() {
        for (Ticket ticket : pending) {
            if (ticket.endLsn != null) {
                return false;
            }
        }
        return true;
    }

    /** Opened transactions not yet complete. */
    public synchronized int pendingTransactions() {
        return pending.size();
    }
}
