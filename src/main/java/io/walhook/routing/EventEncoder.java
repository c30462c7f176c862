package io.walhook.routing;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Pattern;

import io.walhook.change.ChangeEvent;
import io.walhook.change.EventJsonWriter;
import io.walhook.change.JsonWriter;
import io.walhook.change.TxInfo;

/**
 * Writes an event in a subscription's format: the event JSON (docs/events.md), a
 * structured CloudEvent, or the binary CloudEvents mode's headers and body (CloudEvents 1.0 and
 * its HTTP protocol binding). One instance per thread: it shares the value converters' buffers.
 */
public final class EventEncoder {

    /** A request body with its content type and the headers the format adds. */
    public record Encoded(byte[] body, String contentType, Map<String, String> headers) {
        public Encoded {
            headers = Map.copyOf(headers);
        }
    }

    public static final String JSON = "application/json";
    public static final String CLOUDEVENTS_JSON = "application/cloudevents+json";
    /** CloudEvents attribute names: lower-case letters and digits (spec 1.0, "Attribute Naming Convention"). */
    private static final Pattern ATTRIBUTE = Pattern.compile("[a-z0-9]{1,20}");

    private final EventJsonWriter writer = new EventJsonWriter();
    private final String source;
    /** {@link #source} as a binary-mode header value ({@link #percentEncode}): a database name may hold anything. */
    private final String sourceHeader;
    private final Map<String, String> extensions;
    /** The CloudEvents context attributes (and members) each event has of its own: no extension replaces one. */
    public static final java.util.List<String> OWN_ATTRIBUTES = java.util.List.of("specversion", "id", "source", "type",
            "subject", "time", "datacontenttype", "dataschema", "data");
    /* The CloudEvents time of the last transaction seen: formatting it is dearer than most of an event. */
    private TxInfo timeOf;
    private String timeText;

    /**
     * @param source the CloudEvents {@code source} of every event (a URI-reference)
     * @param extensions extension attributes added to every CloudEvent (Knative's K_CE_OVERRIDES)
     */
    public EventEncoder(String source, Map<String, String> extensions) {
        for (String name : extensions.keySet()) {
            if (!ATTRIBUTE.matcher(name).matches() || OWN_ATTRIBUTES.contains(name)) {
                throw new IllegalArgumentException("CloudEvents extension '" + name
                        + "' is not a valid extension name (lower-case letters and digits, 20 at most, none of "
                        + OWN_ATTRIBUTES + ")");
            }
        }
        this.source = source;
        this.sourceHeader = percentEncode(source);
        this.extensions = Map.copyOf(extensions);
    }

    public Encoded encode(ChangeEvent event, EventFormat format, Projection projection) {
        return encode(event, format, projection, null);
    }

    /** The event's JSON without projection, as {@link #encode} writes it; write it once and share it. */
    public byte[] json(ChangeEvent event) {
        return writer.toJson(event);
    }

    /** As {@link #encode(ChangeEvent, EventFormat, Projection)}, reusing {@code json} when no projection applies. */
    public Encoded encode(ChangeEvent event, EventFormat format, Projection projection,
            java.util.function.Supplier<byte[]> json) {
        byte[] data = projection.isAll() ? (json != null ? json.get() : writer.toJson(event))
                : writer.toJson(event, projection::keeps);
        return switch (format) {
            case JSON -> new Encoded(data, JSON, Map.of());
            case CLOUDEVENTS -> new Encoded(structured(event, data), CLOUDEVENTS_JSON, Map.of());
            case CLOUDEVENTS_BINARY -> new Encoded(data, JSON, binaryHeaders(event));
        };
    }

    /** The CloudEvents {@code type}: {@code io.walhook.<op>}. */
    public static String type(ChangeEvent event) {
        return "io.walhook." + event.op().wireName();
    }

    /** The CloudEvents {@code subject}: {@code schema.table}, or a message's prefix. */
    public static String subject(ChangeEvent event) {
        return event.relation() != null ? event.schema() + "." + event.table() : event.messagePrefix();
    }

    private byte[] structured(ChangeEvent event, byte[] data) {
        JsonWriter json = new JsonWriter(data.length + 256);
        json.startObject();
        json.name("specversion").string("1.0");
        json.name("id").string(event.id());
        json.name("source").string(source);
        json.name("type").string(type(event));
        json.name("subject").string(subject(event));
        String time = time(event);
        if (time != null) {
            json.name("time").string(time);
        }
        json.name("datacontenttype").string(JSON);
        for (Map.Entry<String, String> extension : extensions.entrySet()) {
            json.name(extension.getKey()).string(extension.getValue());
        }
        json.name("data").rawValue(data);
        json.endObject();
        return json.toByteArray();
    }

    private Map<String, String> binaryHeaders(ChangeEvent event) {
        Map<String, String> headers = new LinkedHashMap<>();
        headers.put("ce-specversion", "1.0");
        headers.put("ce-id", event.id());
        headers.put("ce-source", sourceHeader);
        headers.put("ce-type", type(event));
        headers.put("ce-subject", percentEncode(subject(event)));
        String time = time(event);
        if (time != null) {
            headers.put("ce-time", time);
        }
        extensions.forEach((name, value) -> headers.put("ce-" + name, percentEncode(value)));
        return headers;
    }

    private String time(ChangeEvent event) {
        if (event.tx() != timeOf) {
            timeText = EventJsonWriter.formatTime(event.tx().commitTime());
            timeOf = event.tx();
        }
        return timeText;
    }

    /**
     * The HTTP binding of CloudEvents 1.0.2 (3.1.3.2): header values are percent-encoded outside
     * printable ASCII, and spaces, {@code "} and {@code %} too, UTF-8 first. (1.0 left spaces inside
     * a value plain, which receivers of 1.0.2 need not take as the value's.)
     */
    static String percentEncode(String value) {
        StringBuilder out = null;
        byte[] bytes = value.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        for (int i = 0; i < bytes.length; i++) {
            int b = bytes[i] & 0xFF;
            boolean plain = b > 0x20 && b < 0x7F && b != '"' && b != '%';
            if (!plain && out == null) {
                out = new StringBuilder(bytes.length + 16);
                out.append(new String(bytes, 0, i, java.nio.charset.StandardCharsets.US_ASCII));
            }
            if (out != null) {
                if (plain) {
                    out.append((char) b);
                } else {
                    out.append('%').append(Character.toUpperCase(Character.forDigit(b >> 4, 16)))
                            .append(Character.toUpperCase(Character.forDigit(b & 0xF, 16)));
                }
            }
        }
        return out == null ? value : out.toString();
    }
}
