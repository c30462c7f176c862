package io.walhook.routing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import javax.sql.DataSource;

import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

import io.walhook.source.SourceFixture;
import io.walhook.testing.TestPostgres;

/** The subscription table's writes, against a real PostgreSQL, as the other instances learn of them. */
class SubscriptionStoreTest {

    /**
     * A write whose connection broke after its commit, before its notification went: the other
     * instances took the write up only at their next look at the table, 30 s later, and routed
     * changes meanwhile under what it replaced. The notification goes on a new connection.
     */
    @Test
    void aWriteWhoseConnectionBrokeAfterItsCommitIsStillAnnounced() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "store_notify");
                Connection listener = source.dataSource.getConnection()) {
            try (Statement s = listener.createStatement()) {
                s.execute("LISTEN " + SubscriptionStore.CHANNEL);
            }
            AtomicBoolean broken = new AtomicBoolean(true);
            AtomicInteger refused = new AtomicInteger();
            SubscriptionStore store = new SubscriptionStore(notifyBreaksOnce(source.dataSource, broken, refused), "walhook");
            store.insert(SourceFixture.JSON.readTree("{\"name\": \"announced\", \"destination\": {\"type\": \"webhook\","
                    + " \"url\": \"https://93.184.216.34/hook\"}}"));
            assertThat(refused.get()).as("the write's own connection broke before its notification").isEqualTo(1);
            assertThat(store.list()).extracting(stored -> stored.subscription().name()).contains("announced");
            PGConnection pg = listener.unwrap(PGConnection.class);
            AtomicInteger heard = new AtomicInteger();
            await().atMost(Duration.ofSeconds(10)).until(() -> {
                PGNotification[] got = pg.getNotifications(200);
                heard.addAndGet(got == null ? 0 : got.length);
                return heard.get() > 0;
            });
        }
    }

    /** Connections whose first notification fails as a connection broken after the commit would. */
    private static DataSource notifyBreaksOnce(DataSource real, AtomicBoolean broken, AtomicInteger refused) {
        return (DataSource) Proxy.newProxyInstance(SubscriptionStoreTest.class.getClassLoader(),
                new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                    Object result = invoke(real, method, args);
                    if (!method.getName().equals("getConnection")) {
                        return result;
                    }
                    Connection connection = (Connection) result;
                    return Proxy.newProxyInstance(SubscriptionStoreTest.class.getClassLoader(),
                            new Class<?>[] {Connection.class}, (c, m, a) -> {
                                Object made = invoke(connection, m, a);
                                if (!m.getName().equals("createStatement")) {
                                    return made;
                                }
                                Statement statement = (Statement) made;
                                return Proxy.newProxyInstance(SubscriptionStoreTest.class.getClassLoader(),
                                        new Class<?>[] {Statement.class}, (st, sm, sa) -> {
                                            if (sm.getName().equals("execute") && sa != null && sa.length == 1
                                                    && String.valueOf(sa[0]).contains("pg_notify") && broken.getAndSet(false)) {
                                                refused.incrementAndGet();
                                                throw new SQLException("An I/O error occurred while sending to the backend.",
                                                        "08006");
                                            }
                                            return invoke(statement, sm, sa);
                                        });
                            });
                });
    }

    private static Object invoke(Object target, java.lang.reflect.Method method, Object[] args) throws Throwable {
        try {
            return method.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}
