package io.walhook.config;

import io.quarkus.runtime.annotations.RegisterForReflection;

/**
 * Classes a native image must keep for reflection that no annotation of ours reaches: protobuf
 * looks up {@code ExtensionRegistry.getEmptyRegistry}/{@code newInstance} reflectively when CEL
 * (row filters) starts (see CelFilter's Javadoc). Untested: there is no GraalVM on the project's machines.
 */
@RegisterForReflection(targets = com.google.protobuf.ExtensionRegistry.class)
public final class NativeImageRegistrations {

    private NativeImageRegistrations() {
    }
}
