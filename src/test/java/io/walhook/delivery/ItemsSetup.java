package io.walhook.delivery;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.WebhookReceiver;

/** What the packaged-jar delivery tests share: a database with an {@code items} table, walhook's variables, a request's events. */
final class ItemsSetup {

    static final String TOKEN = "t0ken";
    private static final ObjectMapper JSON = new ObjectMapper();

    private ItemsSetup() {
    }

    /** A new database with {@code items (id int PRIMARY KEY, n int)}. */
    static String itemsDatabase(PostgresServer pg, String prefix) throws Exception {
        String database = pg.createDatabase(prefix);
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int)");
        return database;
    }

    /** walhook's variables for this database (its own slot, the API token), plus name/value pairs. */
    static Map<String, String> env(PostgresServer pg, String database, String... more) {
        Map<String, String> env = new HashMap<>(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", TOKEN));
        for (int i = 0; i < more.length; i += 2) {
            env.put(more[i], more[i + 1]);
        }
        return env;
    }

    /** Every event a request carried (one, or a batch's array). */
    static List<JsonNode> events(WebhookReceiver.Request request) {
        try {
            JsonNode body = JSON.readTree(request.body());
            List<JsonNode> events = new ArrayList<>();
            (body.isArray() ? body : List.of(body)).forEach(events::add);
            return events;
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
