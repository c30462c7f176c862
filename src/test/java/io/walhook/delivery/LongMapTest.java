package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashMap;
import java.util.Map;
import java.util.Random;

import org.junit.jupiter.api.Test;

class LongMapTest {

    @Test
    void behavesLikeAHashMapUnderRandomPutsAndRemoves() {
        for (long seed = 1; seed <= 50; seed++) {
            Random random = new Random(seed);
            LongMap<String> map = new LongMap<>();
            Map<Long, String> expected = new HashMap<>();
            for (int step = 0; step < 5000; step++) {
                // few distinct keys, clustered, so probe runs collide and wrap
                long key = random.nextInt(4) == 0 ? random.nextLong() : random.nextInt(200) * 64L;
                if (random.nextInt(3) == 0) {
                    String value = expected.get(key);
                    if (value != null && random.nextBoolean()) {
                        map.remove(key, value);
                        expected.remove(key);
                    } else {
                        map.remove(key, "other");
                    }
                } else {
                    String value = "v" + step;
                    assertThat(map.put(key, value)).isEqualTo(expected.put(key, value));
                }
                assertThat(map.size()).isEqualTo(expected.size());
            }
            for (Map.Entry<Long, String> entry : expected.entrySet()) {
                assertThat(map.get(entry.getKey())).as("seed %d key %d", seed, entry.getKey()).isEqualTo(entry.getValue());
            }
            assertThat(map.get(-12345L)).isNull();
        }
    }

    @Test
    void anEmptiedMapGivesBackTheRoomOfItsBurst() {
        LongMap<String> map = new LongMap<>();
        assertThat(map.capacity()).isEqualTo(LongMap.SMALL);
        String[] values = new String[4000];
        for (int k = 0; k < values.length; k++) {
            values[k] = "v" + k;
            map.put(k, values[k]);
        }
        assertThat(map.capacity()).isGreaterThanOrEqualTo(8000);
        for (int k = 0; k < values.length; k++) {
            map.remove(k, values[k]); // removal is by identity of the value, as the queue's jobs are
        }
        assertThat(map.size()).isZero();
        assertThat(map.capacity()).as("an idle lane's map is small again").isEqualTo(LongMap.SMALL);
        map.put(7, "again");
        assertThat(map.get(7)).isEqualTo("again");
        for (long k = 0; k < 100; k++) {
            map.put(k, "w");
        }
        map.clear();
        assertThat(map.capacity()).isEqualTo(LongMap.SMALL);
        assertThat(map.get(7)).isNull();
    }
}
