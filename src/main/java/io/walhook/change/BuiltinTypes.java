package io.walhook.change;

import java.util.HashMap;
import java.util.Map;

/**
 * The types PostgreSQL ships in {@code pg_catalog}, by OID and by name, with the JSON rule each
 * one follows.
 *
 * <p>Built-in OIDs are fixed in {@code pg_type.dat} and never reused, so a table compiled in here
 * is exact for every major version; a built-in this table does not know (one added by a later
 * release) is written as a string. Names matter for user types: a Type message for a domain
 * carries the domain's OID with its base type's name (for example {@code pg_catalog.int4}).
 *
 * <p>Every built-in array type is listed so that each one becomes a JSON array, whatever its
 * elements. {@code int2vector} and {@code oidvector} are not: they print as space-separated
 * lists, not array literals, and stay strings.
 */
final class BuiltinTypes {

    /**
     * pgoutput sends a Type message for every type at or above this OID ({@code FirstGenbkiObjectId});
     * below it only built-ins live.
     */
    static final long FIRST_NON_BUILTIN_OID = 10_000;

    /** What a column of a type becomes: a scalar rule, or an array whose elements follow one. */
    record Rule(ValueKind kind, boolean array, char delimiter) {
        static Rule scalar(ValueKind kind) {
            return new Rule(kind, false, ',');
        }

        static Rule arrayOf(ValueKind kind, char delimiter) {
            return new Rule(kind, true, delimiter);
        }
    }

    private static final Map<Long, Rule> BY_OID = new HashMap<>();
    private static final Map<String, Rule> BY_NAME = new HashMap<>();

    static {
        scalar(16, "bool", ValueKind.BOOLEAN);
        scalar(17, "bytea", ValueKind.BYTEA);
        scalar(20, "int8", ValueKind.NUMBER);
        scalar(21, "int2", ValueKind.NUMBER);
        scalar(23, "int4", ValueKind.NUMBER);
        scalar(26, "oid", ValueKind.NUMBER);
        scalar(114, "json", ValueKind.JSON);
        scalar(700, "float4", ValueKind.NUMBER);
        scalar(701, "float8", ValueKind.NUMBER);
        scalar(1082, "date", ValueKind.DATE);
        scalar(1114, "timestamp", ValueKind.TIMESTAMP);
        scalar(1184, "timestamptz", ValueKind.TIMESTAMPTZ);
        scalar(1700, "numeric", ValueKind.NUMBER);
        scalar(3802, "jsonb", ValueKind.JSON);

        array(1000, "_bool", ValueKind.BOOLEAN);
        array(1001, "_bytea", ValueKind.BYTEA);
        array(1002, "_char", ValueKind.STRING);
        array(1003, "_name", ValueKind.STRING);
        array(1016, "_int8", ValueKind.NUMBER);
        array(1005, "_int2", ValueKind.NUMBER);
        array(1006, "_int2vector", ValueKind.STRING);
        array(1007, "_int4", ValueKind.NUMBER);
        array(1008, "_regproc", ValueKind.STRING);
        array(1009, "_text", ValueKind.STRING);
        array(1028, "_oid", ValueKind.NUMBER);
        array(1010, "_tid", ValueKind.STRING);
        array(1011, "_xid", ValueKind.STRING);
        array(1012, "_cid", ValueKind.STRING);
        array(1013, "_oidvector", ValueKind.STRING);
        array(210, "_pg_type", ValueKind.STRING);
        array(270, "_pg_attribute", ValueKind.STRING);
        array(272, "_pg_proc", ValueKind.STRING);
        array(273, "_pg_class", ValueKind.STRING);
        array(199, "_json", ValueKind.JSON);
        array(143, "_xml", ValueKind.STRING);
        array(1017, "_point", ValueKind.STRING);
        array(1018, "_lseg", ValueKind.STRING);
        array(1019, "_path", ValueKind.STRING);
        BY_OID.put(1020L, Rule.arrayOf(ValueKind.STRING, ';')); // box: the one built-in whose typdelim is ';'
        BY_NAME.put("_box", Rule.arrayOf(ValueKind.STRING, ';'));
        array(1027, "_polygon", ValueKind.STRING);
        array(629, "_line", ValueKind.STRING);
        array(651, "_cidr", ValueKind.STRING);
        array(1021, "_float4", ValueKind.NUMBER);
        array(1022, "_float8", ValueKind.NUMBER);
        array(719, "_circle", ValueKind.STRING);
        array(775, "_macaddr8", ValueKind.STRING);
        array(791, "_money", ValueKind.STRING);
        array(1040, "_macaddr", ValueKind.STRING);
        array(1041, "_inet", ValueKind.STRING);
        array(1034, "_aclitem", ValueKind.STRING);
        array(1014, "_bpchar", ValueKind.STRING);
        array(1015, "_varchar", ValueKind.STRING);
        array(1182, "_date", ValueKind.DATE);
        array(1183, "_time", ValueKind.STRING);
        array(1115, "_timestamp", ValueKind.TIMESTAMP);
        array(1185, "_timestamptz", ValueKind.TIMESTAMPTZ);
        array(1187, "_interval", ValueKind.STRING);
        array(1270, "_timetz", ValueKind.STRING);
        array(1561, "_bit", ValueKind.STRING);
        array(1563, "_varbit", ValueKind.STRING);
        array(1231, "_numeric", ValueKind.NUMBER);
        array(2201, "_refcursor", ValueKind.STRING);
        array(2207, "_regprocedure", ValueKind.STRING);
        array(2208, "_regoper", ValueKind.STRING);
        array(2209, "_regoperator", ValueKind.STRING);
        array(2210, "_regclass", ValueKind.STRING);
        array(2211, "_regtype", ValueKind.STRING);
        array(1263, "_cstring", ValueKind.STRING);
        array(2951, "_uuid", ValueKind.STRING);
        array(2949, "_txid_snapshot", ValueKind.STRING);
        array(3221, "_pg_lsn", ValueKind.STRING);
        array(3643, "_tsvector", ValueKind.STRING);
        array(3645, "_tsquery", ValueKind.STRING);
        array(3644, "_gtsvector", ValueKind.STRING);
        array(3735, "_regconfig", ValueKind.STRING);
        array(3770, "_regdictionary", ValueKind.STRING);
        array(3807, "_jsonb", ValueKind.JSON);
        array(3905, "_int4range", ValueKind.STRING);
        array(3907, "_numrange", ValueKind.STRING);
        array(3909, "_tsrange", ValueKind.STRING);
        array(3911, "_tstzrange", ValueKind.STRING);
        array(3913, "_daterange", ValueKind.STRING);
        array(3927, "_int8range", ValueKind.STRING);
        array(4073, "_jsonpath", ValueKind.STRING);
        array(4090, "_regnamespace", ValueKind.STRING);
        array(4097, "_regrole", ValueKind.STRING);
        array(4192, "_regcollation", ValueKind.STRING);
        array(6150, "_int4multirange", ValueKind.STRING);
        array(6151, "_nummultirange", ValueKind.STRING);
        array(6152, "_tsmultirange", ValueKind.STRING);
        array(6153, "_tstzmultirange", ValueKind.STRING);
        array(6155, "_datemultirange", ValueKind.STRING);
        array(6157, "_int8multirange", ValueKind.STRING);
        array(5039, "_pg_snapshot", ValueKind.STRING);
        array(271, "_xid8", ValueKind.STRING);
    }

    private BuiltinTypes() {
    }

    /** The rule of a built-in type, or {@code null} when this OID is not one with a rule of its own (a string, then). */
    static Rule byOid(long oid) {
        return BY_OID.get(oid);
    }

    /** The rule of a {@code pg_catalog} type by name, or {@code null} for a scalar written as a string. */
    static Rule byName(String name) {
        return BY_NAME.get(name);
    }

    private static void scalar(long oid, String name, ValueKind kind) {
        Rule rule = Rule.scalar(kind);
        BY_OID.put(oid, rule);
        BY_NAME.put(name, rule);
    }

    private static void array(long oid, String name, ValueKind elementKind) {
        Rule rule = Rule.arrayOf(elementKind, ',');
        BY_OID.put(oid, rule);
        BY_NAME.put(name, rule);
    }
}
