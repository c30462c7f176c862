package io.walhook.pgoutput;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

class LsnTest {

    @Test
    void formatsLikePostgres() {
        assertThat(Lsn.of(0x1A2B3B08L)).hasToString("0/1A2B3B08");
        assertThat(Lsn.of(0x16_B374D848L)).hasToString("16/B374D848");
        assertThat(Lsn.INVALID).hasToString("0/0");
        assertThat(Lsn.of(-1L)).hasToString("FFFFFFFF/FFFFFFFF");
        assertThat(Lsn.of(0x1_0000_0000L)).hasToString("1/0");
    }

    @Test
    void parsesWhatItFormats() {
        for (long value : new long[] {0, 1, 0x1A2B3B08L, 0x16_B374D848L, Long.MIN_VALUE, -1L, 0xFFFF_FFFFL}) {
            Lsn lsn = Lsn.of(value);
            assertThat(Lsn.parse(lsn.toString())).isEqualTo(lsn);
        }
        assertThat(Lsn.parse("16/b374d848")).isEqualTo(Lsn.of(0x16_B374D848L));
        assertThat(Lsn.parse("00000000/00000001")).isEqualTo(Lsn.of(1));
    }

    @Test
    void rejectsMalformedTextNamingIt() {
        for (String bad : new String[] {"", "/", "0", "0/", "/0", "0/0/0", "G/0", "0/1G", "123456789/0", "0/123456789",
                " 0/0", "0/0 ", "+1/0", "-1/0", "0/-1", "0x1/0", "１/0"}) {
            assertThatThrownBy(() -> Lsn.parse(bad)).as(bad).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("\"" + bad + "\"");
        }
        assertThatThrownBy(() -> Lsn.parse(null)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void equalByValueOnly() {
        assertThat(Lsn.of(0x16_B374D848L)).isEqualTo(Lsn.parse("16/B374D848")).hasSameHashCodeAs(Lsn.parse("16/b374d848"));
        assertThat(Lsn.of(1)).isNotEqualTo(Lsn.of(2)).isNotEqualTo(null).isNotEqualTo(1L);
        assertThat(new Lsn(0)).isEqualTo(Lsn.INVALID);
        assertThat(Lsn.of(-1L).hashCode()).isEqualTo(Long.hashCode(-1L));
    }

    @Test
    void comparesUnsigned() {
        Lsn high = Lsn.of(0x8000_0000_0000_0000L);
        Lsn low = Lsn.of(0x7FFF_FFFF_FFFF_FFFFL);
        assertThat(high).isGreaterThan(low);
        assertThat(Lsn.of(-1L)).isGreaterThan(Lsn.of(1L));
        assertThat(Lsn.INVALID).isLessThan(Lsn.of(1L));
        assertThat(high.isAfter(low)).isTrue();
        assertThat(low.isBefore(high)).isTrue();
        assertThat(Lsn.max(low, high)).isSameAs(high);

        List<Lsn> sorted = new ArrayList<>(List.of(Lsn.of(-1L), Lsn.of(5), high, Lsn.INVALID, low));
        Collections.sort(sorted);
        assertThat(sorted).containsExactly(Lsn.INVALID, Lsn.of(5), low, high, Lsn.of(-1L));
    }

    @Test
    void givesSixteenHexDigitsForIds() {
        assertThat(Lsn.of(0x16_B374D848L).hex16()).isEqualTo("00000016B374D848");
        assertThat(Lsn.INVALID.hex16()).isEqualTo("0000000000000000");
        assertThat(Lsn.of(-1L).hex16()).isEqualTo("FFFFFFFFFFFFFFFF");
    }

    @Test
    void addsBytesWithoutWrapping() {
        assertThat(Lsn.parse("0/FFFFFFFF").plus(1)).isEqualTo(Lsn.parse("1/0"));
        assertThat(Lsn.of(0x7FFF_FFFF_FFFF_FFFFL).plus(1)).isEqualTo(Lsn.of(Long.MIN_VALUE));
        assertThatThrownBy(() -> Lsn.of(-1L).plus(1)).isInstanceOf(ArithmeticException.class);
        assertThatThrownBy(() -> Lsn.INVALID.plus(-1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void treatsZeroAsInvalid() {
        assertThat(Lsn.INVALID.isValid()).isFalse();
        assertThat(Lsn.of(0)).isEqualTo(Lsn.INVALID);
        assertThat(Lsn.of(1).isValid()).isTrue();
        assertThat(Lsn.of(-1L).isValid()).isTrue();
    }
}
