package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Optional;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class SourceUrlTest {

    private static SourceUrl parse(String url) {
        return SourceUrl.parse(Optional.ofNullable(url), Optional.empty(), Optional.empty());
    }

    @Test
    void readsEveryPartOfALibpqUrl() {
        SourceUrl url = parse("postgresql://app:s%40cret@db.example.com:6543/orders?sslmode=verify-full");
        assertThat(url.host()).isEqualTo("db.example.com");
        assertThat(url.port()).isEqualTo(6543);
        assertThat(url.database()).isEqualTo("orders");
        assertThat(url.user()).isEqualTo("app");
        assertThat(url.password()).isEqualTo("s@cret");
        assertThat(url.jdbcUrl()).isEqualTo("jdbc:postgresql://db.example.com:6543/orders?sslmode=verify-full");
        assertThat(url.reactiveUrl()).isEqualTo("postgresql://db.example.com:6543/orders?sslmode=verify-full");
        assertThat(url.toString()).doesNotContain("s@cret");
    }

    @Test
    void defaultsThePortAndLetsOverridesWin() {
        SourceUrl url = SourceUrl.parse(Optional.of("postgres://app:old@localhost/db"), Optional.of("other"),
                Optional.of("new"));
        assertThat(url.port()).isEqualTo(5432);
        assertThat(url.user()).isEqualTo("other");
        assertThat(url.password()).isEqualTo("new");
    }

    /** A password holding '?' made its rest the query: with the user set apart, what is wrong there is not quoted. */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "postgresql://app:2024/x?Zq9xW@db/orders     | has an unsupported parameter;",
        "postgresql://app:2024/x?sslmode=Zq9xW@db/o  | has sslmode=(not shown)",
        // only the last pair holds the '@': the first is part of the password as well
        "postgresql://app:2024/x?Zq9&xW@db/orders    | has an unsupported parameter;",
        // an '@' in the password before its '/' and '?': user info found ("app:Kx", host "9"), and the rest a query
        "postgresql://app:Kx@9/Q?Zq9xW@db/orders     | has an unsupported parameter;",
        "postgresql://app:Kx@9/Q?sslmode=Zq9xW@db/o  | has sslmode=(not shown)",
        // a '#' in the password made the rest a fragment, and the host 'app', its port the first digits
        "postgresql://app:2024/x#Zq9@db/orders       | has a fragment",
        "postgresql://app:2024/Zq9#xW@db/orders      | has a fragment",
    })
    void aPasswordInTheQueryNeverAppearsInTheProblem(String url, String problem) {
        assertThatThrownBy(() -> SourceUrl.parse(Optional.of(url), Optional.of("app"), Optional.empty()))
                .isInstanceOf(ConfigException.class).hasMessageContaining(problem)
                .hasMessageContaining("percent-encode").hasMessageNotContaining("Zq9").hasMessageNotContaining("xW");
    }

    @Test
    void anAtInAParameterOfAUrlWithoutCredentialsIsFine() {
        SourceUrl url = SourceUrl.parse(Optional.of("postgresql://db/app?application_name=svc@prod"), Optional.of("app"),
                Optional.empty());
        assertThat(url.parameters()).containsEntry("application_name", "svc@prod");
    }

    /**
     * A password holding an unencoded '@', '/', '?' or '#' breaks the URL where a host belongs: the
     * problem says how to write it, and holds no part of it, nor the user name before it, which can
     * be the credential (the message goes to the start-up log).
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "postgresql://app:Zq9@xW@db/orders           | more than one '@'",
        "postgresql://app:Zq9/xW@db:5432/orders      | cut short by a '/', '?' or '#'",
        "postgresql://app:Zq9#xW@db/orders           | cut short by a '/', '?' or '#'",
        "postgresql://app:Zq9?xW@db/orders           | cut short by a '/', '?' or '#'",
        "postgresql://app_user:Zq9/xW@db/orders      | cut short by a '/', '?' or '#'",
        "postgresql://app:Zq9xW@db*host:5432/orders  | has 'db*host:5432' where a host[:port] belongs",
        "postgresql://app:Zq9/xW@db_host/orders      | cut short by a '/', '?' or '#'",
        "postgresql://app:2024/Zq9xW@db/orders       | has '@' after its host",
        "postgresql://app@srv:Zq9/xW@srv.example.com/orders | cut short by a '/', '?' or '#'",
        "postgresql://app@srv:Zq9#xW@srv.example.com/orders | cut short by a '/', '?' or '#'",
        "postgresql://app@srv:Zq9?xW@srv.example.com/orders | cut short by a '/', '?' or '#'",
    })
    void aPasswordNeverAppearsInTheProblem(String url, String problem) {
        assertThatThrownBy(() -> parse(url)).isInstanceOf(ConfigException.class).hasMessageContaining(problem)
                .hasMessageContaining("percent-encode").hasMessageNotContaining("Zq9").hasMessageNotContaining("xW");
    }

    /**
     * A URL whose scheme, or whose "@host", was left out reads its user name as the scheme, or its
     * password as the port: neither is repeated.
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "Zq9xW:secret@db/orders                 | must start with postgresql://, not a URL without a scheme",
        "postgresql://app:70000556              | has a port outside 1 to 65535 (or, its @host left out, a password",
        "jdbc:postgresql://app:Zq9xW@db/orders  | must start with postgresql://, not jdbc:postgresql://",
    })
    void aUserNameOrPasswordReadAsTheSchemeOrThePortIsNotRepeated(String url, String problem) {
        assertThatThrownBy(() -> parse(url)).isInstanceOf(ConfigException.class).hasMessageContaining(problem)
                .hasMessageNotContaining("Zq9").hasMessageNotContaining("70000556");
    }

    /**
     * A host name holding '_' (RFC 3986 allows it; Docker Compose's service names have it) is a
     * host, though java.net.URI reads such an authority as no host at all: it was refused.
     */
    @Test
    void aHostNameHoldingAnUnderscoreIsAHost() {
        SourceUrl url = parse("postgresql://app:Zq9%40xW@postgres_db:6543/orders?sslmode=disable");
        assertThat(url.host()).isEqualTo("postgres_db");
        assertThat(url.port()).isEqualTo(6543);
        assertThat(url.user()).isEqualTo("app");
        assertThat(url.password()).isEqualTo("Zq9@xW");
        assertThat(url.jdbcUrl()).startsWith("jdbc:postgresql://postgres_db:6543/orders");
        assertThat(parse("postgresql://app@db_primary.internal./orders").host()).isEqualTo("db_primary.internal.");
        assertThat(parse("postgresql://app@db_primary/orders").port()).isEqualTo(5432);
        assertThat(parse("postgresql://app@db_primary/orders?sslmode=require").host()).isEqualTo("db_primary");
        // Java's TLS cannot check a certificate against such a name: it could never connect
        assertThatThrownBy(() -> parse("postgresql://app:Zq9xW@db_primary/orders?sslmode=verify-full"))
                .isInstanceOf(ConfigException.class).hasMessageContaining("sslmode=verify-full")
                .hasMessageContaining("db_primary").hasMessageContaining("'_'").hasMessageNotContaining("Zq9xW");
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "                                           | is required",
        "mysql://u@h/db                             | must start with postgresql://",
        "postgresql://u@h                           | must name one database",
        "postgresql://u@h/db?sslmode=sometimes      | sslmode=sometimes",
        "postgresql://u@h/db?currentSchema=x        | unsupported parameter 'currentSchema'",
        "postgresql://h/db                          | names no user",
        "postgresql://u@h:99999999999/db            | is not host[:port]",
    })
    void namesTheVariableAndTheProblem(String url, String problem) {
        assertThatThrownBy(() -> parse(url))
                .isInstanceOf(ConfigException.class)
                .hasMessageStartingWith("WALHOOK_SOURCE_URL ")
                .hasMessageContaining(problem)
                .satisfies(e -> assertThat(e.getMessage()).doesNotContain("\n"));
    }
}
