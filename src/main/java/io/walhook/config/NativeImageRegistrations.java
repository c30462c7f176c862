package io.walhook.config;

import io.quarkus.runtime.annotations.RegisterForReflection;

/**
 * Classes a native image must keep for reflection that no annotation of ours reaches: protobuf
 * looks up {@code ExtensionRegistry.getEmptyRegistry}/{@code newInstance} reflectively when CEL
 * (row filters) starts, and builds the well-known types of message literals in filters by name
 * (see CelFilter's Javadoc). CelFilter itself is initialised at run time
 * ({@code quarkus.native.additional-build-args}). Untested: there is no GraalVM on the project's machines.
 */
@RegisterForReflection(targets = {com.google.protobuf.ExtensionRegistry.class, com.google.protobuf.Timestamp.class,
        com.google.protobuf.Duration.class, com.google.protobuf.Any.class, com.google.protobuf.Struct.class,
        com.google.protobuf.Value.class, com.google.protobuf.ListValue.class, com.google.protobuf.NullValue.class,
        com.google.protobuf.BoolValue.class, com.google.protobuf.BytesValue.class, com.google.protobuf.DoubleValue.class,
        com.google.protobuf.FloatValue.class, com.google.protobuf.Int32Value.class, com.google.protobuf.Int64Value.class,
        com.google.protobuf.StringValue.class, com.google.protobuf.UInt32Value.class, com.google.protobuf.UInt64Value.class})
public final class NativeImageRegistrations {

    private NativeImageRegistrations() {
    }
}
