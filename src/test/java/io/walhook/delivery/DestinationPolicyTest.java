package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetAddress;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class DestinationPolicyTest {

    @ParameterizedTest
    @ValueSource(strings = {"127.0.0.1", "127.9.9.9", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
            "0.0.0.0", "0.1.2.3", "100.64.0.1", "100.127.255.255", "192.0.0.8", "198.18.0.1", "240.0.0.1",
            "255.255.255.255", "224.0.0.1", "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1",
            "2001:db8::1", "3fff::1", "3fff:fff:ffff::1",
            // documentation (TEST-NET-1 to 3), local-use NAT64 (RFC 8215: maps to whatever the network chose)
            "192.0.2.1", "198.51.100.7", "203.0.113.200", "64:ff9b:1::a00:1", "64:ff9b:1:ffff::1",
            // IPv4 inside IPv6: mapped, compatible, NAT64, 6to4
            "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "::10.0.0.1", "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "2002:a9fe:a9fe::1", "2002:c0a8:0101::"})
    void refusesAddressesOfTheLocalNetwork(String address) throws Exception {
        assertThat(DestinationPolicy.refusal(InetAddress.getByName(address))).as(address).isPresent();
    }

    @ParameterizedTest
    @ValueSource(strings = {"93.184.216.34", "8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.1", "172.32.0.1",
            "2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "64:ff9b::808:808", "2002:808:808::1",
            "192.0.3.1", "198.51.101.1", "203.0.114.1", "64:ff9b:2::1", "3ffe::1", "3fff:1000::1"})
    void allowsPublicAddresses(String address) throws Exception {
        assertThat(DestinationPolicy.refusal(InetAddress.getByName(address))).as(address).isEmpty();
    }
}
