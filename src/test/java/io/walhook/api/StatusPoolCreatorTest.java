package io.walhook.api;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Which client keys the pool behind {@code /status} can present: pgjdbc reads an encrypted key
 * (with {@code sslpassword}) and only when a server asks for a certificate; the Vert.x client
 * would fail every connection on one, and {@code /status} with it, so an encrypted key is left out.
 * The keys are made by openssl, as an operator makes them.
 */
class StatusPoolCreatorTest {

    @TempDir
    static Path keys;

    @BeforeAll
    static void makeKeys() throws Exception {
        openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "plain.pem");
        openssl("pkcs8", "-topk8", "-nocrypt", "-in", "plain.pem", "-outform", "DER", "-out", "plain.pk8");
        openssl("pkcs8", "-topk8", "-in", "plain.pem", "-passout", "pass:secret", "-out", "encrypted.pem");
        openssl("pkcs8", "-topk8", "-in", "plain.pem", "-passout", "pass:secret", "-outform", "DER", "-out", "encrypted.pk8");
    }

    private static void openssl(String... args) throws Exception {
        List<String> command = new ArrayList<>(List.of("openssl"));
        command.addAll(List.of(args));
        Process process = new ProcessBuilder(command).directory(keys.toFile()).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes());
        assertThat(process.waitFor(60, TimeUnit.SECONDS) && process.exitValue() == 0).as(output).isTrue();
    }

    @ParameterizedTest
    @CsvSource({"plain.pem, false", "plain.pk8, false", "encrypted.pem, true", "encrypted.pk8, true"})
    void anEncryptedKeyIsToldFromAPlainOne(String file, boolean encrypted) throws Exception {
        byte[] key = Files.readAllBytes(keys.resolve(file));
        assertThat(StatusPoolCreator.encrypted(key)).isEqualTo(encrypted);
        if (!encrypted) {
            // what the pool is given reads as a PEM private key either way
            assertThat(StatusPoolCreator.pemKey(key).toString()).startsWith("-----BEGIN PRIVATE KEY-----");
        }
    }
}
