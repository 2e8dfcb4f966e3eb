import java.util.Collection;
import java.util.Iterator;
import java.util.Map;

/**
 * The one way the interop programs report: one JSON object per line on stdout, so the Python test reads results
 * with json.loads instead of scraping text. Only what the programs print is supported: strings, numbers,
 * booleans, null, maps with string keys and collections.
 */
final class JsonLines {
    private JsonLines() {
    }

    /** Prints {"check": name, key1: value1, ...}; keysAndValues alternate a String key and its value. */
    static void emit(String check, Object... keysAndValues) {
        StringBuilder out = new StringBuilder("{\"check\":");
        write(out, check);
        for (int i = 0; i < keysAndValues.length; i += 2) {
            out.append(',');
            write(out, String.valueOf(keysAndValues[i]));
            out.append(':');
            write(out, keysAndValues[i + 1]);
        }
        out.append('}');
        System.out.println(out);
        System.out.flush();
    }

    /** The simple class name of an exception's root cause: what a test asserts for an expected Kafka error. */
    static String errorName(Throwable error) {
        Throwable cause = error;
        while (cause.getCause() != null && cause != cause.getCause()) {
            cause = cause.getCause();
        }
        return cause.getClass().getSimpleName();
    }

    private static void write(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof Map) {
            out.append('{');
            Iterator<? extends Map.Entry<?, ?>> entries = ((Map<?, ?>) value).entrySet().iterator();
            while (entries.hasNext()) {
                Map.Entry<?, ?> entry = entries.next();
                write(out, String.valueOf(entry.getKey()));
                out.append(':');
                write(out, entry.getValue());
                if (entries.hasNext()) {
                    out.append(',');
                }
            }
            out.append('}');
        } else if (value instanceof Collection) {
            out.append('[');
            Iterator<?> items = ((Collection<?>) value).iterator();
            while (items.hasNext()) {
                write(out, items.next());
                if (items.hasNext()) {
                    out.append(',');
                }
            }
            out.append(']');
        } else {
            String text = value.toString();
            out.append('"');
            for (int i = 0; i < text.length(); i++) {
                char c = text.charAt(i);
                if (c == '"' || c == '\\') {
                    out.append('\\').append(c);
                } else if (c < 0x20) {
                    out.append(String.format("\\u%04x", (int) c));
                } else {
                    out.append(c);
                }
            }
            out.append('"');
        }
    }
}
