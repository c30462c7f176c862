package io.walhook.testing;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;

/**
 * What one class logs at WARN or above while open, as JBoss Logging hands it to the log manager.
 * It checks at opening that it sees that class's lines: a capture that saw nothing because the
 * logging went elsewhere would pass every test that expects silence.
 */
public final class LogLines extends Handler implements AutoCloseable {

    private final List<String> lines = new CopyOnWriteArrayList<>();
    private final java.util.logging.Logger logger;

    public LogLines(Class<?> logging) {
        logger = java.util.logging.Logger.getLogger(logging.getName());
        logger.addHandler(this);
        org.jboss.logging.Logger.getLogger(logging).warn("log capture probe");
        if (lines.stream().noneMatch(line -> line.endsWith(" log capture probe"))) {
            close();
            throw new IllegalStateException("the log capture of " + logging.getName() + " saw no probe: " + lines);
        }
        lines.clear();
    }

    /** The lines so far, each as its level and its message (unformatted). */
    public List<String> lines() {
        return List.copyOf(lines);
    }

    @Override
    public void publish(LogRecord record) {
        if (record.getLevel().intValue() >= Level.WARNING.intValue()) {
            lines.add(record.getLevel() + " " + record.getMessage()
                    + (record.getThrown() == null ? "" : " [" + record.getThrown() + "]"));
        }
    }

    @Override
    public void flush() {
    }

    @Override
    public void close() {
        logger.removeHandler(this);
    }
}
