package io.walhook.delivery;

/**
 * A map from long keys to values, open addressing with linear probing: the per-event lookups of
 * {@link KeyedQueue} without boxing a key or allocating an entry. Not thread-safe.
 *
 * <p>Small while little is in it: every subscription's lane has three, so with 10,000 tenant
 * subscriptions their size at rest is heap. It starts at {@value #SMALL} slots, and goes back
 * to that when emptied after growing.
 */
final class LongMap<V> {

    static final int SMALL = 8;

    private long[] keys = new long[SMALL];
    private Object[] values = new Object[SMALL];
    private int size;

    private static int slot(long key, int mask) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 32)) & mask;
    }

    @SuppressWarnings("unchecked")
    V get(long key) {
        int mask = keys.length - 1;
        for (int i = slot(key, mask); values[i] != null; i = (i + 1) & mask) {
            if (keys[i] == key) {
                return (V) values[i];
            }
        }
        return null;
    }

    /** Maps {@code key} to {@code value} (not null); returns the value it had, or null. */
    @SuppressWarnings("unchecked")
    V put(long key, V value) {
        if ((size + 1) * 2 > keys.length) {
            grow();
        }
        int mask = keys.length - 1;
        int i = slot(key, mask);
        for (; values[i] != null; i = (i + 1) & mask) {
            if (keys[i] == key) {
                V old = (V) values[i];
                values[i] = value;
                return old;
            }
        }
        keys[i] = key;
        values[i] = value;
        size++;
        return null;
    }

    /** Removes {@code key} only while it maps to {@code value}. */
    void remove(long key, V value) {
        int mask = keys.length - 1;
        int i = slot(key, mask);
        for (; values[i] != null; i = (i + 1) & mask) {
            if (keys[i] == key) {
                if (values[i] == value) {
                    delete(i);
                    if (size == 0 && keys.length > SMALL) {
                        shrink();
                    }
                }
                return;
            }
        }
    }

    private void shrink() {
        keys = new long[SMALL];
        values = new Object[SMALL];
    }

    /** Slots it has now (for tests: it does not keep the room of a burst). */
    int capacity() {
        return keys.length;
    }

    /** Empties the slot and moves later entries of its probe run back, so every lookup still finds them. */
    private void delete(int hole) {
        int mask = keys.length - 1;
        values[hole] = null;
        size--;
        for (int i = (hole + 1) & mask; values[i] != null; i = (i + 1) & mask) {
            int home = slot(keys[i], mask);
            // the entry at i may fill the hole if its home is not cyclically in (hole, i]
            if (((i - home) & mask) >= ((i - hole) & mask)) {
                keys[hole] = keys[i];
                values[hole] = values[i];
                values[i] = null;
                hole = i;
            }
        }
    }

    void clear() {
        if (keys.length > SMALL) {
            shrink();
        } else {
            java.util.Arrays.fill(values, null);
        }
        size = 0;
    }

    int size() {
        return size;
    }

    private void grow() {
        long[] oldKeys = keys;
        Object[] oldValues = values;
        keys = new long[oldKeys.length * 2];
        values = new Object[oldValues.length * 2];
        size = 0;
        for (int i = 0; i < oldKeys.length; i++) {
            if (oldValues[i] != null) {
                @SuppressWarnings("unchecked")
                V value = (V) oldValues[i];
                put(oldKeys[i], value);
            }
        }
    }
}
