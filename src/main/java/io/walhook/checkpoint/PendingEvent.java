package io.walhook.checkpoint;

import io.walhook.change.ChangeEvent;

/**
 * An event handed from the reader to delivery. Whoever takes it must, once it is delivered or
 * durably parked, call {@code tracker.complete(ticket, 1)}: until then its transaction holds the
 * acknowledged position back. {@code bytes} is its {@link ChangeEvent#memoryBytes()}, counted once by
 * the reader, what the hand-off is bounded by.
 */
public record PendingEvent(ChangeEvent event, AckTracker.Ticket ticket, long bytes) {
}
