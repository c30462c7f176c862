package io.walhook.config;

/**
 * What a problem with a URL's authority (its {@code [user[:password]@]host[:port]}) may show: the
 * part where a password cannot be. A password holding an unencoded '@', '/', '?' or '#' breaks the
 * URL right there, and the message goes to the start-up log and to API answers.
 */
public final class UrlAuthority {

    private UrlAuthority() {
    }

    /**
     * The problem with the authority of {@code uri} that did not read as
     * {@code [user[:password]@]host[:port]}.
     */
    public static String problem(java.net.URI uri) {
        String rawAuthority = uri.getRawAuthority();
        int at = rawAuthority.lastIndexOf('@');
        if (at >= 0 && rawAuthority.indexOf('@') != at) {
            return "has more than one '@' before its host: percent-encode '@' in a user name or password as %40";
        }
        String rest = java.util.Objects.toString(uri.getRawPath(), "") + java.util.Objects.toString(uri.getRawQuery(), "")
                + java.util.Objects.toString(uri.getRawFragment(), "");
        if (rest.indexOf('@') >= 0) {
            // app@server:pass/word@host: the authority ends inside the password, whose start follows the '@' it
            // holds; token:pass/word@host and token/x@host: it holds the user name, which can be the credential (an
            // API key as basic auth's user), and maybe the password's start
            return "has user info cut short by a '/', '?' or '#' before its host: percent-encode '@', '/', '?' and '#'"
                    + " in a user name or password (%40, %2F, %3F, %23)";
        }
        // after the last '@' there is no password; without an '@', what follows a ':' may be one cut short
        String shown = at >= 0 ? rawAuthority.substring(at + 1) : rawAuthority.split(":", 2)[0];
        return "has '" + shown + "' where a host[:port] belongs, and it is not host[:port] (a host name holds letters,"
                + " digits, '-' and '.'; percent-encode '@', '/', '?' and '#' in a user name or password)";
    }
}
