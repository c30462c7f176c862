package io.walhook.delivery;

import java.io.IOException;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import io.walhook.change.RelationInfo;
import io.walhook.routing.EventEncoder;

/**
 * A queued job's row key as JSON ({@code {"id": 42}}), kept with its row in the durable queue so the
 * API can list one row's dead letters. Read back from the event as it was written (not from the
 * tuples: they belong to the routing thread): its {@code key}, or for an insert or an update that
 * kept its key, the key columns of {@code new}. Null for messages, truncates, and a key projected away.
 */
final class RowKeys {

    private static final ObjectMapper JSON = new ObjectMapper();

    private RowKeys() {
    }

    static String of(Job job) {
        if (job.rowKey != null || job.relation == null) {
            return job.rowKey;
        }
        try {
            JsonNode event = JSON.readTree(job.body);
            if (event != null && EventEncoder.CLOUDEVENTS_JSON.equals(job.contentType)) {
                event = event.get("data");
            }
            if (event == null || !event.isObject()) {
                return null;
            }
            JsonNode key = event.get("key");
            if (key != null && key.isObject()) {
                return key.isEmpty() ? null : key.toString(); // projected away (FULL, no primary key): none to file it under
            }
            JsonNode row = event.get("new");
            if (row == null || !row.isObject()) {
                return null;
            }
            RelationInfo relation = job.relation;
            ObjectNode columns = JSON.createObjectNode();
            for (int i = 0; i < relation.columnCount(); i++) {
                if (relation.isKey(i)) {
                    JsonNode value = row.get(relation.columnName(i));
                    if (value == null) {
                        return null; // projected away: no key to file it under
                    }
                    columns.set(relation.columnName(i), value);
                }
            }
            return columns.isEmpty() ? null : columns.toString();
        } catch (IOException notJson) {
            return null;
        }
    }
}
