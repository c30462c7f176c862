package io.walhook.change;

import static io.walhook.change.ValueConvertersTest.json;
import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** PostgreSQL's array text form, read as {@code array_in} reads it, becomes nested JSON arrays. */
class ValueConverterArraysTest {

    private final ValueConverters converters = new ValueConverters();

    private String array(long arrayOid, String text) {
        return json(converters.forType(arrayOid, null, null), text);
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        // as array_out prints them
        "{1,2,3}                         | [1,2,3]",
        "{}                              | []",
        "{1,NULL,3}                      | [1,null,3]",
        "{NULL}                          | [null]",
        "{{1,2},{3,4}}                   | [[1,2],[3,4]]",
        "{{{1},{2}},{{3},{4}}}           | [[[1],[2]],[[3],[4]]]",
        "[0:1]={1,2}                     | [1,2]",
        "[-2:-1]={5,6}                   | [5,6]",
        "[1:1][-1:0]={{1,2}}             | [[1,2]]",
        // what array_in also accepts
        "` { 1 , 2 } `                   | [1,2]",
        "` [0:1] = {1,2}`                | [1,2]",
        "{null,Null}                     | [null,null]",
        "{{},{}}                         | [[],[]]",
        "{-0,1e+20}                      | [-0.0,1e+20]",
    })
    void integerArrays(String text, String expected) {
        assertThat(array(1007, text)).isEqualTo(expected);
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "`{\"NULL\",NULL,\"\",\"a b\",\"q\\\"b\\\\s\",\"x,y\",\"{}\",ünï,\"tab\there\"}` | `[\"NULL\",null,\"\",\"a b\",\"q\\\"b\\\\s\",\"x,y\",\"{}\",\"ünï\",\"tab\\there\"]`",
        "`{\"}\",\"{\",\"\\\\\",\"\\\"\"}`                                          | `[\"}\",\"{\",\"\\\\\",\"\\\"\"]`",
        "`{a\\,b,\\NULL,c\\\\d}`                                                     | `[\"a,b\",\"NULL\",\"c\\\\d\"]`",
        "`{ spaced out , \" kept \" }`                                               | `[\"spaced out\",\" kept \"]`",
        "`{\"line\nbreak\",\"\u0001\",\"😀\"}`                                        | `[\"line\\nbreak\",\"\\u0001\",\"😀\"]`",
        "`{{a,b},{\"c\",NULL}}`                                                      | `[[\"a\",\"b\"],[\"c\",null]]`",
    })
    void textArrays(String text, String expected) {
        assertThat(array(1009, text)).isEqualTo(expected);
    }

    @Test
    void elementsFollowTheScalarRuleOfTheirType() {
        assertThat(array(1231, "{1.50,NaN,Infinity,-Infinity,NULL}")).isEqualTo("[1.50,\"NaN\",\"Infinity\",\"-Infinity\",null]");
        assertThat(array(1022, "{-0,1.5,NaN,-Infinity}")).isEqualTo("[-0.0,1.5,\"NaN\",\"-Infinity\"]");
        assertThat(array(1021, "{1e-07}")).isEqualTo("[1e-07]");
        assertThat(array(1016, "{9223372036854775807}")).isEqualTo("[9223372036854775807]");
        assertThat(array(1005, "{{1,2},{3,4}}")).isEqualTo("[[1,2],[3,4]]");
        assertThat(array(1028, "{4294967295}")).isEqualTo("[4294967295]");
        assertThat(array(1000, "{t,f,NULL}")).isEqualTo("[true,false,null]");
        assertThat(array(3807, "{\"{\\\"a\\\": [1, \\\"x\\\\\\\"y\\\"]}\",\"null\",NULL,\"[]\"}"))
                .isEqualTo("[{\"a\": [1, \"x\\\"y\"]},null,null,[]]");
        assertThat(array(199, "{\"{\\\"k\\\": \\\"ü\\\"}\"}")).isEqualTo("[{\"k\": \"ü\"}]");
        assertThat(array(1001, "{\"\\\\x00ff\",NULL,\"\\\\x\"}")).isEqualTo("[\"AP8=\",null,\"\"]");
        assertThat(array(1185, "{\"2026-11-29 16:00:00+00\",infinity,\"0044-03-15 12:00:00+00 BC\"}"))
                .isEqualTo("[\"2026-11-29T16:00:00Z\",\"infinity\",\"-0043-03-15T12:00:00Z\"]");
        assertThat(array(1115, "{\"2026-11-29 16:00:00.5\",-infinity}")).isEqualTo("[\"2026-11-29T16:00:00.5\",\"-infinity\"]");
        assertThat(array(1182, "{2026-11-29,\"0044-03-15 BC\"}")).isEqualTo("[\"2026-11-29\",\"-0043-03-15\"]");
        assertThat(array(1183, "{16:00:00.123456}")).isEqualTo("[\"16:00:00.123456\"]");
        assertThat(array(2951, "{0b3a4a0e-6c1f-4b0e-9a3e-1c2d3e4f5a6b}")).isEqualTo("[\"0b3a4a0e-6c1f-4b0e-9a3e-1c2d3e4f5a6b\"]");
        assertThat(array(3905, "{\"[1,5)\",empty}")).isEqualTo("[\"[1,5)\",\"empty\"]");
        assertThat(array(1187, "{\"1 day\",\"-1 years -2 mons\"}")).isEqualTo("[\"1 day\",\"-1 years -2 mons\"]");
    }

    @Test
    void boxArraysUseTheSemicolonDelimiter() {
        assertThat(array(1020, "{(1,1),(0,0);(2,2),(1,1)}")).isEqualTo("[\"(1,1),(0,0)\",\"(2,2),(1,1)\"]");
        assertThat(array(1020, "{{(1,1),(0,0)};{(2,2),(1,1)}}")).isEqualTo("[[\"(1,1),(0,0)\"],[\"(2,2),(1,1)\"]]");
        // with ',' as the delimiter, a point array splits where box's would not
        assertThat(array(1017, "{\"(1,1)\",\"(0,0)\"}")).isEqualTo("[\"(1,1)\",\"(0,0)\"]");
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "``", "1,2", "{1,2", "{1,,2}", "{1,}", "{,1}", "{1}}", "{1} x", "`{\"a}`", "{a\"b}", "{a{b}", "{{1}{2}}",
        "[0:1]{1,2}", "[x]={1}", "[0:1", "{{{{{{{1}}}}}}}", "`{\"a\"b}`", "{a\\}",
    })
    void textThatIsNoArrayLiteralIsWrittenAsAString(String text) {
        String out = array(1009, text);
        assertThat(out).isEqualTo('"' + text.replace("\\", "\\\\").replace("\"", "\\\"") + '"');
    }

    @Test
    void sixDimensionsAreAccepted() {
        assertThat(array(1007, "{{{{{{1}}}}}}")).isEqualTo("[[[[[[1]]]]]]");
    }
}
