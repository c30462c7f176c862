package io.walhook.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** CPU time and memory of a process (and its threads) from Linux's /proc. */
final class ProcStats {

    private static final long CLOCK_TICKS = clockTicks();

    private ProcStats() {
    }

    /** A process's or thread's name (its comm, at most 15 characters) and CPU ticks in user and kernel mode. */
    record ThreadTicks(String name, long user, long sys) {
        long ticks() {
            return user + sys;
        }
    }

    /** Clock ticks per second ({@code getconf CLK_TCK}; 100 when that cannot be run). */
    static long clockTicks() {
        try {
            Process p = new ProcessBuilder("getconf", "CLK_TCK").redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.US_ASCII).strip();
            if (p.waitFor(5, TimeUnit.SECONDS) && p.exitValue() == 0) {
                return Long.parseLong(out);
            }
        } catch (IOException | NumberFormatException e) {
            // fall through
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return 100;
    }

    static long ticksToMicros(long ticks) {
        return ticks * 1_000_000L / CLOCK_TICKS;
    }

    /** utime + stime of a process (all its threads), in clock ticks; -1 when it is gone. */
    static long cpuTicks(long pid) {
        ThreadTicks t = process(pid);
        return t == null ? -1 : t.ticks();
    }

    /** utime and stime of a process (all its threads); null when it is gone. */
    static ThreadTicks process(long pid) {
        return read(Path.of("/proc", Long.toString(pid), "stat"));
    }

    /** Every thread of a process by thread id. */
    static Map<Long, ThreadTicks> threads(long pid) {
        Map<Long, ThreadTicks> threads = new HashMap<>();
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc", Long.toString(pid), "task"))) {
            for (Path task : tasks) {
                ThreadTicks t = read(task.resolve("stat"));
                if (t != null) {
                    threads.put(Long.parseLong(task.getFileName().toString()), t);
                }
            }
        } catch (IOException | NumberFormatException e) {
            // the process is gone: what was read so far
        }
        return threads;
    }

    /** Context switches (voluntary and not) of every thread of a process so far: each is a sleep or a preemption. */
    static long contextSwitches(long pid) {
        long sum = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc", Long.toString(pid), "task"))) {
            for (Path task : tasks) {
                try {
                    for (String line : Files.readAllLines(task.resolve("status"))) {
                        if (line.startsWith("voluntary_ctxt_switches:") || line.startsWith("nonvoluntary_ctxt_switches:")) {
                            sum += Long.parseLong(line.substring(line.indexOf(':') + 1).strip());
                        }
                    }
                } catch (IOException e) {
                    // the thread ended
                }
            }
        } catch (IOException | NumberFormatException e) {
            // the process is gone: what was read so far
        }
        return sum;
    }

    /** Peak resident set size (VmHWM) in kB; -1 when unknown. */
    static long peakRssKb(long pid) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.substring(6).replace("kB", "").strip());
                }
            }
        } catch (IOException | NumberFormatException e) {
            // unknown
        }
        return -1;
    }

    private static ThreadTicks read(Path stat) {
        String s;
        try {
            s = Files.readString(stat, StandardCharsets.ISO_8859_1);
        } catch (IOException e) {
            return null;
        }
        int open = s.indexOf('(');
        int close = s.lastIndexOf(')');
        if (open < 0 || close < open) {
            return null;
        }
        // after "pid (comm) ": state is field 3, utime field 14, stime field 15
        String[] f = s.substring(close + 2).split(" ");
        return new ThreadTicks(s.substring(open + 1, close), Long.parseLong(f[11]), Long.parseLong(f[12]));
    }

    /**
     * Follows one process's CPU time until it exits, so its last value survives it; counts from the
     * process's start (for a walsender: everything it did for its one connection).
     */
    static final class CpuWatch implements AutoCloseable {
        private final long pid;
        private final Thread thread;
        private volatile ThreadTicks last;
        private volatile boolean running = true;

        CpuWatch(long pid) {
            this.pid = pid;
            this.thread = new Thread(this::poll, "bench-cpu-" + pid);
            thread.setDaemon(true);
            thread.start();
        }

        private void poll() {
            while (running) {
                ThreadTicks t = process(pid);
                if (t == null) {
                    return;
                }
                last = t;
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }

        /** Ticks used since the process started, as last seen (before it ended or the watch was closed). */
        ThreadTicks ticks() {
            ThreadTicks t = last;
            return t == null ? new ThreadTicks("?", 0, 0) : t;
        }

        /** Ticks used since the process started, read now when it still runs. */
        ThreadTicks ticksNow() {
            ThreadTicks t = process(pid);
            if (t != null) {
                last = t;
            }
            return ticks();
        }

        @Override
        public void close() {
            running = false;
            thread.interrupt();
        }
    }
}
