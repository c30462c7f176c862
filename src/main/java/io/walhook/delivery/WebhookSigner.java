package io.walhook.delivery;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.Base64;
import java.util.List;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Standard Webhooks signatures: {@code v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">} keyed
 * with the decoded part of each {@code whsec_} secret, space-separated when there are several
 * (rotation). A new {@link Mac} per call: they are not thread-safe and cheap to make.
 */
public final class WebhookSigner {

    private WebhookSigner() {
    }

    public static String sign(List<byte[]> secrets, String id, long timestamp, byte[] body) {
        StringBuilder header = new StringBuilder();
        byte[] prefix = (id + "." + timestamp + ".").getBytes(StandardCharsets.UTF_8);
        for (byte[] secret : secrets) {
            try {
                Mac mac = Mac.getInstance("HmacSHA256");
                mac.init(new SecretKeySpec(secret, "HmacSHA256"));
                mac.update(prefix);
                byte[] signature = mac.doFinal(body);
                if (header.length() > 0) {
                    header.append(' ');
                }
                header.append("v1,").append(Base64.getEncoder().encodeToString(signature));
            } catch (GeneralSecurityException e) {
                throw new IllegalStateException("HmacSHA256 is unavailable: " + e.getMessage(), e);
            }
        }
        return header.toString();
    }
}
