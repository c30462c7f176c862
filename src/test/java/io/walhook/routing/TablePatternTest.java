package io.walhook.routing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class TablePatternTest {

    @ParameterizedTest
    @CsvSource({
        "*, public, orders, true",
        "public.orders, public, orders, true",
        "public.orders, public, orders2, false",
        "public.*, public, anything, true",
        "public.*, sales, orders, false",
        "*.orders, sales, orders, true",
        "sales.order_*, sales, order_lines, true",
        "sales.order_*, sales, orders, false",
        "s*s.*_x*, sales, a_xb, true",
        "s*s.*_x*, sale, a_xb, false",
        "Public.Orders, public, orders, false",
    })
    void matchesSchemaAndTableSeparately(String pattern, String schema, String table, boolean matches) {
        assertThat(TablePattern.parse(pattern).matches(schema, table)).isEqualTo(matches);
    }

    @ParameterizedTest
    @ValueSource(strings = {"orders", ".orders", "public.", "a.b.c", "public.ord ers", "public.\"x\""})
    void rejectsWhatIsNotSchemaDotTable(String pattern) {
        assertThatThrownBy(() -> TablePattern.parse(pattern)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining(pattern.strip());
    }
}
