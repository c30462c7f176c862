package io.walhook.testing;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import io.walhook.pgoutput.PgOutputDecoder;
import io.walhook.pgoutput.PgOutputMessage;

/** The harness gives a test a real server with logical decoding, for each major it is asked for. */
class PostgresHarnessTest {

    @ParameterizedTest(name = "PostgreSQL {0}")
    @ValueSource(ints = {15, 17})
    void startsServerWhoseSlotStreamsAnInsert(int major) throws Exception {
        PostgresServer server = TestPostgres.shared(major);
        String db = server.createDatabase("harness");
        try (Connection c = server.connect(db); Statement s = c.createStatement()) {
            try (ResultSet rs = s.executeQuery("SELECT current_setting('server_version_num')::int / 10000,"
                    + " current_setting('wal_level')")) {
                rs.next();
                assertThat(rs.getInt(1)).isEqualTo(major);
                assertThat(rs.getString(2)).isEqualTo("logical");
            }
            s.execute("CREATE TABLE greeting (id int PRIMARY KEY, word text)");
            s.execute("CREATE PUBLICATION harness_pub FOR TABLE greeting");
            s.execute("SELECT pg_create_logical_replication_slot('harness_slot', 'pgoutput')");
            s.execute("INSERT INTO greeting VALUES (1, 'hello')");

            List<PgOutputMessage> messages = new ArrayList<>();
            PgOutputDecoder decoder = new PgOutputDecoder();
            try (ResultSet rs = s.executeQuery("SELECT data FROM pg_logical_slot_get_binary_changes('harness_slot',"
                    + " NULL, NULL, 'proto_version', '1', 'publication_names', 'harness_pub')")) {
                while (rs.next()) {
                    messages.add(decoder.decode(ByteBuffer.wrap(rs.getBytes(1))));
                }
            }
            assertThat(messages).hasSize(4);
            assertThat(messages.get(0)).isInstanceOf(PgOutputMessage.Begin.class);
            PgOutputMessage.Relation relation = (PgOutputMessage.Relation) messages.get(1);
            assertThat(relation.relationName()).isEqualTo("greeting");
            PgOutputMessage.Insert insert = (PgOutputMessage.Insert) messages.get(2);
            assertThat(insert.newTuple().text(0)).isEqualTo("1");
            assertThat(insert.newTuple().text(1)).isEqualTo("hello");
            assertThat(messages.get(3)).isInstanceOf(PgOutputMessage.Commit.class);

            // get_ consumed the change: the slot moved on
            try (ResultSet rs = s.executeQuery("SELECT count(*) FROM pg_logical_slot_get_binary_changes('harness_slot',"
                    + " NULL, NULL, 'proto_version', '1', 'publication_names', 'harness_pub')")) {
                rs.next();
                assertThat(rs.getInt(1)).isZero();
            }
            s.execute("SELECT pg_drop_replication_slot('harness_slot')");
        }
    }
}
