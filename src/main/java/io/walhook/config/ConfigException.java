package io.walhook.config;

/**
 * A configuration value walhook cannot run with. The message is one line: the environment
 * variable, then what is wrong with it.
 */
public final class ConfigException extends RuntimeException {

    private final String variable;

    public ConfigException(String variable, String problem) {
        super(variable + " " + problem);
        this.variable = variable;
    }

    public String variable() {
        return variable;
    }
}
