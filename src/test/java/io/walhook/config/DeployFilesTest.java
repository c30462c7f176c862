package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.routing.SubscriptionConfigReader;
import io.walhook.testing.WalhookProcess;

/**
 * The files under {@code deploy/} cannot be run here (no Docker engine, no cluster): this test
 * checks what can be checked on paper. Every YAML file parses; every variable they give walhook
 * is one walhook reads; the pieces refer to each other by the right names.
 */
class DeployFilesTest {

    private static final Path DEPLOY = Path.of("deploy");
    /** Variables of the runtime image's run-java.sh that the deploy files may set besides walhook's own. */
    private static final Set<String> IMAGE_VARIABLES = Set.of("JAVA_OPTS_APPEND");

    private static List<Object> load(Path file) throws IOException {
        Yaml yaml = new Yaml(new SafeConstructor(new LoaderOptions()));
        List<Object> documents = new ArrayList<>();
        try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            for (Object document : yaml.loadAll(reader)) {
                if (document != null) {
                    documents.add(document);
                }
            }
        }
        return documents;
    }

    private static List<Path> yamlFiles() throws IOException {
        try (Stream<Path> files = Files.walk(DEPLOY)) {
            return files.filter(p -> p.toString().endsWith(".yaml") || p.toString().endsWith(".yml")).sorted().toList();
        }
    }

    /** Every Kubernetes object under a directory, by kind. */
    private static Map<String, List<Map<String, Object>>> objects(Path directory) throws IOException {
        Map<String, List<Map<String, Object>>> byKind = new LinkedHashMap<>();
        try (Stream<Path> files = Files.list(directory)) {
            for (Path file : files.filter(p -> p.toString().endsWith(".yaml")).sorted().toList()) {
                for (Object document : load(file)) {
                    Map<String, Object> object = map(document, file.toString());
                    byKind.computeIfAbsent((String) object.get("kind"), k -> new ArrayList<>()).add(object);
                }
            }
        }
        return byKind;
    }

    private static Map<String, Object> only(Map<String, List<Map<String, Object>>> objects, String kind) {
        assertThat(objects.get(kind)).as("one " + kind).isNotNull().hasSize(1);
        return objects.get(kind).get(0);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Object value, String what) {
        assertThat(value).as(what + " is a mapping").isInstanceOf(Map.class);
        return (Map<String, Object>) value;
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Object value, String what) {
        assertThat(value).as(what + " is a list").isInstanceOf(List.class);
        return (List<Object>) value;
    }

    /** Follows a path of keys (strings) and list indexes (integers). */
    private static Object at(Object root, Object... path) {
        Object current = root;
        StringBuilder where = new StringBuilder();
        for (Object step : path) {
            where.append('/').append(step);
            current = step instanceof Integer i ? list(current, where.toString()).get(i)
                    : map(current, where.toString()).get(step);
            assertThat(current).as(where + " is set").isNotNull();
        }
        return current;
    }

    private static List<String> unknownVariables(Iterable<String> names) {
        List<String> unknown = new ArrayList<>();
        for (String name : names) {
            if (ConfigReference.match(name).isEmpty() && !ConfigReference.OTHER_VARIABLES.containsKey(name)
                    && !IMAGE_VARIABLES.contains(name)) {
                unknown.add(name);
            }
        }
        return unknown;
    }

    @Test
    void everyYamlFileParses() throws IOException {
        List<Path> files = yamlFiles();
        assertThat(files).extracting(Path::toString).contains("deploy/compose.yaml", "deploy/k8s/deployment.yaml",
                "deploy/k8s/service.yaml", "deploy/k8s/secret.yaml", "deploy/k8s/poddisruptionbudget.yaml",
                "deploy/knative/sinkbinding.yaml");
        for (Path file : files) {
            List<Object> documents = load(file);
            assertThat(documents).as(file + " has documents").isNotEmpty();
            documents.forEach(d -> map(d, file.toString()));
        }
    }

    @Test
    void composeRunsPostgresWithLogicalReplicationWalhookAndAReceiver() throws IOException {
        Map<String, Object> services = map(at(load(DEPLOY.resolve("compose.yaml")).get(0), "services"), "services");
        assertThat(services).containsKeys("postgres", "walhook", "receiver");
        assertThat(list(at(services, "postgres", "command"), "command")).contains("wal_level=logical");
        services.forEach((name, service) -> at(service, "healthcheck", "test"));

        Map<String, Object> walhook = map(services.get("walhook"), "walhook");
        Path dockerfile = DEPLOY.resolve((String) at(walhook, "build", "context"))
                .resolve((String) at(walhook, "build", "dockerfile")).normalize();
        assertThat(dockerfile).as("the Dockerfile compose builds").isEqualTo(DEPLOY.resolve("Dockerfile.jvm")).exists();
        Map<String, Object> dependsOn = map(at(walhook, "depends_on"), "depends_on");
        assertThat(dependsOn).containsOnlyKeys("postgres", "receiver");
        dependsOn.values().forEach(d -> assertThat(at(d, "condition")).isEqualTo("service_healthy"));

        Map<String, Object> env = map(at(walhook, "environment"), "walhook's environment");
        assertThat(unknownVariables(env.keySet())).as("variables walhook does not read in deploy/compose.yaml").isEmpty();
        String url = (String) env.get("WALHOOK_SOURCE_URL");
        String user = (String) at(services, "postgres", "environment", "POSTGRES_USER");
        String password = (String) at(services, "postgres", "environment", "POSTGRES_PASSWORD");
        String database = (String) at(services, "postgres", "environment", "POSTGRES_DB");
        assertThat(url).isEqualTo("postgresql://" + user + ":" + password + "@postgres:5432/" + database);
        assertThat(SourceUrl.parse(java.util.Optional.of(url), java.util.Optional.empty(), java.util.Optional.empty()))
                .isNotNull();
        assertThat((String) env.get("WALHOOK_SUBSCRIPTIONS_DEMO_URL")).startsWith("http://receiver:");
        String secret = (String) env.get("WALHOOK_SUBSCRIPTIONS_DEMO_SECRET");
        assertThat(secret).startsWith("whsec_");
        assertThat(Base64.getDecoder().decode(secret.substring("whsec_".length()))).hasSizeGreaterThanOrEqualTo(16);
    }

    /**
     * The image, compose and Kubernetes run walhook with the JVM options the tests and the benchmark
     * use ({@link WalhookProcess#JVM_OPTIONS}); run-java.sh takes its collector from GC_CONTAINER_OPTIONS.
     */
    @Test
    void everyLauncherUsesTheJvmOptionsTheTestsAndBenchmarkUse() throws IOException {
        List<String> jit = WalhookProcess.JVM_OPTIONS.stream().filter(o -> !o.equals("-XX:+UseSerialGC")).toList();
        String dockerfile = Files.readString(DEPLOY.resolve("Dockerfile.jvm"), StandardCharsets.UTF_8);
        assertThat(dockerEnv(dockerfile, "GC_CONTAINER_OPTIONS")).isEqualTo("-XX:+UseSerialGC");
        assertThat(dockerEnv(dockerfile, "JAVA_OPTS_APPEND").split(" ")).as("Dockerfile.jvm").contains(jit.toArray(String[]::new));

        Map<String, Object> compose = map(at(load(DEPLOY.resolve("compose.yaml")).get(0), "services", "walhook", "environment"),
                "walhook's environment");
        assertThat(((String) compose.get("JAVA_OPTS_APPEND")).split(" ")).as("compose.yaml").contains(jit.toArray(String[]::new));

        Map<String, Object> container = map(at(only(objects(DEPLOY.resolve("k8s")), "Deployment"), "spec", "template", "spec",
                "containers", 0), "container");
        String k8sOptions = list(at(container, "env"), "env").stream().map(e -> map(e, "env entry"))
                .filter(e -> "JAVA_OPTS_APPEND".equals(e.get("name"))).map(e -> (String) e.get("value")).findFirst().orElse("");
        assertThat(k8sOptions.split(" ")).as("k8s/deployment.yaml").contains(jit.toArray(String[]::new));

        assertThat(Files.readString(Path.of("README.md"), StandardCharsets.UTF_8)).as("the README's java command")
                .contains("cd target/quarkus-app\njava -Xmx256m " + String.join(" ", WalhookProcess.JVM_OPTIONS)
                        + " \\\n  -XX:SharedArchiveFile=app-cds.jsa -jar quarkus-run.jar");
    }

    /** The value of {@code ENV NAME="..."} in a Dockerfile. */
    private static String dockerEnv(String dockerfile, String name) {
        Matcher env = Pattern.compile("(?m)^ENV " + name + "=\"([^\"]*)\"").matcher(dockerfile);
        assertThat(env.find()).as("ENV " + name + " in the Dockerfile").isTrue();
        return env.group(1);
    }

    @Test
    @SuppressWarnings("unchecked")
    void kubernetesObjectsReferToEachOtherAndSetOnlyRealVariables() throws IOException {
        Map<String, List<Map<String, Object>>> k8s = objects(DEPLOY.resolve("k8s"));
        Map<String, Object> deployment = only(k8s, "Deployment");
        Map<String, Object> secret = only(k8s, "Secret");
        Map<String, Object> service = only(k8s, "Service");
        Map<String, Object> pdb = only(k8s, "PodDisruptionBudget");

        Map<String, Object> podLabels = map(at(deployment, "spec", "template", "metadata", "labels"), "pod labels");
        assertThat(podLabels).containsAllEntriesOf(map(at(deployment, "spec", "selector", "matchLabels"), "selector"));
        assertThat(podLabels).containsAllEntriesOf(map(at(service, "spec", "selector"), "service selector"));
        assertThat(podLabels).containsAllEntriesOf(map(at(pdb, "spec", "selector", "matchLabels"), "pdb selector"));
        assertThat(at(deployment, "spec", "replicas")).as("an active instance and a warm standby").isEqualTo(2);
        assertThat(at(deployment, "spec", "strategy", "rollingUpdate", "maxUnavailable"))
                .as("a rolling update never leaves the slot without a reader-to-be").isEqualTo(0);

        Map<String, Object> pod = map(at(deployment, "spec", "template", "spec"), "pod spec");
        assertThat(at(pod, "securityContext", "runAsNonRoot")).isEqualTo(true);
        assertThat((Integer) at(pod, "securityContext", "runAsUser")).isPositive();
        Map<String, Object> container = map(at(pod, "containers", 0), "container");
        assertThat(at(container, "readinessProbe", "httpGet", "path")).isEqualTo("/q/health/ready");
        assertThat(at(container, "livenessProbe", "httpGet", "path")).isEqualTo("/q/health/live");
        assertThat(at(container, "securityContext", "allowPrivilegeEscalation")).isEqualTo(false);
        assertThat(at(container, "envFrom", 0, "secretRef", "name")).isEqualTo(at(secret, "metadata", "name"));

        List<String> names = new ArrayList<>();
        Map<String, String> values = new LinkedHashMap<>();
        for (Object entry : list(at(container, "env"), "env")) {
            Map<String, Object> e = map(entry, "env entry");
            names.add((String) e.get("name"));
            values.put((String) e.get("name"), String.valueOf(e.get("value")));
        }
        names.addAll(map(at(secret, "stringData"), "stringData").keySet());
        assertThat(unknownVariables(names)).as("variables walhook does not read in deploy/k8s").isEmpty();

        // The heap and what the JVM needs beside it fit the memory limit.
        Matcher xmx = Pattern.compile("-Xmx(\\d+)m").matcher(values.getOrDefault("JAVA_OPTS_APPEND", ""));
        assertThat(xmx.find()).as("JAVA_OPTS_APPEND sets -Xmx<n>m").isTrue();
        int heapMiB = Integer.parseInt(xmx.group(1));
        String limit = (String) at(container, "resources", "limits", "memory");
        String request = (String) at(container, "resources", "requests", "memory");
        assertThat(limit).endsWith("Mi");
        int limitMiB = Integer.parseInt(limit.substring(0, limit.length() - 2));
        assertThat(limitMiB).as("memory limit leaves about 200 MiB beside the heap").isGreaterThanOrEqualTo(heapMiB + 192);
        assertThat(request).isEqualTo(limit);
        assertThat(at(container, "ports", 0, "containerPort")).isEqualTo(8080);
        assertThat(at(service, "spec", "ports", 0, "targetPort")).isEqualTo(at(container, "ports", 0, "name"));
    }

    @Test
    void sinkBindingBindsTheWalhookDeploymentToItsBrokerWithOverridesWalhookAccepts() throws Exception {
        Map<String, List<Map<String, Object>>> knative = objects(DEPLOY.resolve("knative"));
        Map<String, Object> binding = only(knative, "SinkBinding");
        Map<String, Object> deployment = only(objects(DEPLOY.resolve("k8s")), "Deployment");
        assertThat(at(binding, "apiVersion")).isEqualTo("sources.knative.dev/v1");
        assertThat(at(binding, "spec", "subject", "kind")).isEqualTo("Deployment");
        assertThat(at(binding, "spec", "subject", "name")).isEqualTo(at(deployment, "metadata", "name"));
        Map<String, Object> broker = only(knative, "Broker");
        assertThat(at(binding, "spec", "sink", "ref", "kind")).isEqualTo("Broker");
        assertThat(at(binding, "spec", "sink", "ref", "name")).isEqualTo(at(broker, "metadata", "name"));
        for (Map<String, Object> trigger : knative.getOrDefault("Trigger", List.of())) {
            assertThat(at(trigger, "spec", "broker")).isEqualTo(at(broker, "metadata", "name"));
        }
        // Knative hands spec.ceOverrides to the container as the JSON of K_CE_OVERRIDES.
        String overrides = new ObjectMapper().writeValueAsString(at(binding, "spec", "ceOverrides"));
        assertThat(SubscriptionConfigReader.cloudEventsOverrides(overrides)).isNotEmpty();
    }
}
