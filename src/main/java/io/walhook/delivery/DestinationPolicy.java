package io.walhook.delivery;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Optional;

/**
 * Which addresses a webhook created through the API may reach unless
 * {@code WALHOOK_ALLOW_PRIVATE_DESTINATIONS=true}: public unicast ones only. walhook runs inside
 * its operator's network; an API user must not make it call the database, the cloud's metadata
 * service (169.254.169.254) or anything else on that network (SSRF). The check applies to the
 * address each request actually connects to, not only to what the name resolved to when the
 * subscription was written: a name can resolve elsewhere later (DNS rebinding).
 *
 * <p>IPv6 forms that embed an IPv4 address are judged by that address: IPv4-mapped
 * ({@code ::ffff:a.b.c.d}), IPv4-compatible ({@code ::a.b.c.d}), NAT64 ({@code 64:ff9b::/96}) and
 * 6to4 ({@code 2002::/16}). A local-use NAT64 address ({@code 64:ff9b:1::/48}) is refused: its
 * network maps it as it chose, to private addresses too.
 */
public final class DestinationPolicy {

    private DestinationPolicy() {
    }

    /** Why this address is refused (for the problem or log line), or empty when it is public. */
    public static Optional<String> refusal(InetAddress address) {
        if (address instanceof Inet6Address v6) {
            byte[] a = v6.getAddress();
            Inet4Address embedded = embeddedIpv4(a);
            if (embedded != null) {
                return refusal(embedded).map(why -> why + " (embedded in " + address.getHostAddress() + ")");
            }
            if ((a[0] & 0xFE) == 0xFC) {
                return Optional.of("a unique local IPv6 address (fc00::/7)");
            }
            if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && (a[3] & 0xFF) == 0xb8
                    || a[0] == 0x3f && (a[1] & 0xFF) == 0xff && (a[2] & 0xF0) == 0) {
                return Optional.of("a documentation address (2001:db8::/32, 3fff::/20)");
            }
            if (a[0] == 0x00 && a[1] == 0x64 && (a[2] & 0xFF) == 0xff && (a[3] & 0xFF) == 0x9b && a[4] == 0 && a[5] == 1) {
                // RFC 8215: translated to IPv4 by the local network's own mapping, private addresses included
                return Optional.of("a local-use NAT64 address (64:ff9b:1::/48)");
            }
        }
        if (address.isLoopbackAddress()) {
            return Optional.of("a loopback address");
        }
        if (address.isAnyLocalAddress()) {
            return Optional.of("the unspecified address");
        }
        if (address.isLinkLocalAddress()) {
            return Optional.of("a link-local address (cloud metadata services live there)");
        }
        if (address.isSiteLocalAddress()) {
            return Optional.of("a private address");
        }
        if (address.isMulticastAddress()) {
            return Optional.of("a multicast address");
        }
        if (address instanceof Inet4Address) {
            byte[] a = address.getAddress();
            int first = a[0] & 0xFF;
            int second = a[1] & 0xFF;
            if (first == 0) {
                return Optional.of("in 0.0.0.0/8 (this network)");
            }
            if (first == 100 && (second & 0xC0) == 64) {
                return Optional.of("a carrier-grade NAT address (100.64.0.0/10)");
            }
            if (first == 192 && second == 0 && (a[2] & 0xFF) == 0) {
                return Optional.of("an IETF protocol address (192.0.0.0/24)");
            }
            if ((first == 192 && second == 0 && (a[2] & 0xFF) == 2) || (first == 198 && second == 51 && (a[2] & 0xFF) == 100)
                    || (first == 203 && second == 0 && (a[2] & 0xFF) == 113)) {
                return Optional.of("a documentation address (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24)");
            }
            if (first == 198 && (second & 0xFE) == 18) {
                return Optional.of("a benchmarking address (198.18.0.0/15)");
            }
            if (first >= 240) {
                return Optional.of("a reserved address (240.0.0.0/4)");
            }
        }
        return Optional.empty();
    }

    /** The IPv4 address an IPv6 one carries (IPv4-compatible, NAT64, 6to4), or null. */
    private static Inet4Address embeddedIpv4(byte[] a) {
        boolean zeroPrefix = true;
        for (int i = 0; i < 12; i++) {
            zeroPrefix &= a[i] == 0;
        }
        boolean nat64 = a[0] == 0x00 && a[1] == 0x64 && (a[2] & 0xFF) == 0xff && (a[3] & 0xFF) == 0x9b;
        for (int i = 4; i < 12 && nat64; i++) {
            nat64 = a[i] == 0;
        }
        try {
            if (zeroPrefix && !(a[12] == 0 && a[13] == 0 && a[14] == 0 && (a[15] == 0 || a[15] == 1))) {
                return (Inet4Address) InetAddress.getByAddress(new byte[] {a[12], a[13], a[14], a[15]});
            }
            if (nat64) {
                return (Inet4Address) InetAddress.getByAddress(new byte[] {a[12], a[13], a[14], a[15]});
            }
            if (a[0] == 0x20 && a[1] == 0x02) {
                return (Inet4Address) InetAddress.getByAddress(new byte[] {a[2], a[3], a[4], a[5]});
            }
        } catch (UnknownHostException impossible) {
            throw new IllegalStateException(impossible);
        }
        return null;
    }
}
