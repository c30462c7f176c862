package io.walhook.config;

import java.util.OptionalInt;

import io.smallrye.config.ConfigSourceInterceptor;
import io.smallrye.config.ConfigSourceInterceptorContext;
import io.smallrye.config.ConfigSourceInterceptorFactory;
import io.smallrye.config.ConfigValue;
import io.smallrye.config.Expressions;
import io.smallrye.config.Priorities;

/**
 * walhook's settings are taken as written: SmallRye would read {@code ${...}} in any value as a
 * reference to another property and {@code $$} as one {@code $}, so a password or token holding
 * them became another one, or nothing without a word (an unknown reference empties an optional
 * setting). The values derived from {@code WALHOOK_SOURCE_URL} are taken as written too, or a
 * password would be expanded on its way to the pools. Other properties (Quarkus' own) keep
 * their expressions.
 */
public final class LiteralValues implements ConfigSourceInterceptorFactory {

    /** Just above SmallRye's expansion ({@code LIBRARY + 300}), so it runs before it. */
    private static final int PRIORITY = Priorities.LIBRARY + 400;

    @Override
    public ConfigSourceInterceptor getInterceptor(ConfigSourceInterceptorContext context) {
        return LiteralValues::value;
    }

    @Override
    public OptionalInt getPriority() {
        return OptionalInt.of(PRIORITY);
    }

    private static ConfigValue value(ConfigSourceInterceptorContext context, String name) {
        ConfigValue written = Expressions.withoutExpansion(() -> context.proceed(name));
        if (written == null || written.getValue() == null || written.getValue().indexOf('$') < 0
                || isLiteral(name, written)) {
            return written;
        }
        return context.proceed(name);
    }

    static boolean isLiteral(String name, ConfigValue value) {
        return name.startsWith("walhook.") || DatasourceConfigSourceFactory.SOURCE_NAME.equals(value.getConfigSourceName());
    }

    /** The factory's own reads of walhook's settings, which no interceptor sees. */
    static ConfigValue written(io.smallrye.config.ConfigSourceContext context, String name) {
        return Expressions.withoutExpansion(() -> context.getValue(name));
    }
}
