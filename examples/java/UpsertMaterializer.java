// A sink upsert materializer in Java, written against the JSON Lines protocol of `upsertmat replay`
// so that the upsertmat conformance suite can test it (docs/conformance.md, "Testing an engine
// written in another language"). One file, no dependencies, no build tool: `java UpsertMaterializer.java`.
//
//   java UpsertMaterializer.java --pk 0 [--upsert-key 1] < changes.jsonl > emitted.jsonl
//
// stdin: {"op": "+I"|"-U"|"+U"|"-D", "row": [...], "ts": T} or {"time": T}, one per line.
// stdout: {"in": N, "op": "+I"|"+U"|"-D", "row": [...]} per emitted change, flushed at once.
// State: per sink key, the rows in arrival order (the LEGACY layout). No TTL: any --set is refused
// with exit code 2, which the suite reports as "skipped" for the TTL tests. No state directory.
//
// JSON values keep their type: integers are BigInteger, numbers with '.', 'e' or 'E' are Double,
// so 1, 1.0 and true are three different values (for matching, keys and output).

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public class UpsertMaterializer {
    private static final Object NULL = new Object() {
        @Override
        public String toString() {
            return "null";
        }
    };

    public static void main(String[] args) throws IOException {
        int[] pk = null;
        int[] upsertKey = new int[0];
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--pk" -> pk = columns(args[++i]);
                case "--upsert-key" -> upsertKey = columns(args[++i]);
                case "--set" -> refuse("settings are not supported (no TTL): --set " + args[++i]);
                default -> refuse("unknown argument " + args[i]);
            }
        }
        if (pk == null) {
            refuse("--pk COLS is required");
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        Map<List<Object>, List<List<Object>>> state = new HashMap<>();
        long index = -1;
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            index++;
            if (line.isBlank()) {
                continue;
            }
            Map<?, ?> input = (Map<?, ?>) new Json(line).parse();
            if (input.containsKey("time")) {
                continue; // a clock line: no TTL, nothing to do
            }
            String op = (String) input.get("op");
            @SuppressWarnings("unchecked")
            List<Object> row = (List<Object>) input.get("row");
            List<Object> context = project(row, pk);
            List<List<Object>> rows = state.computeIfAbsent(context, key -> new ArrayList<>());
            Object wanted = matchKey(row, upsertKey);
            int found = -1;
            for (int i = 0; i < rows.size() && found < 0; i++) {
                if (matchKey(rows.get(i), upsertKey).equals(wanted)) {
                    found = i;
                }
            }
            if (op.equals("+I") || op.equals("+U")) {
                emit(out, index, rows.isEmpty() ? "+I" : "+U", row);
                if (upsertKey.length > 0 && found >= 0) {
                    rows.set(found, row); // replace in place
                } else {
                    rows.add(row);
                }
            } else if (found >= 0) {
                boolean wasLast = found == rows.size() - 1;
                rows.remove(found);
                if (rows.isEmpty()) {
                    state.remove(context);
                    emit(out, index, "-D", row); // the retraction's own values
                } else if (wasLast) {
                    emit(out, index, "+U", rows.get(rows.size() - 1));
                }
            } else if (rows.isEmpty()) {
                state.remove(context); // a retraction that matched nothing: no output
            }
        }
        out.flush();
    }

    private static void refuse(String message) {
        System.err.println("UpsertMaterializer: " + message);
        System.exit(2);
    }

    private static int[] columns(String text) {
        if (text.isEmpty()) {
            return new int[0];
        }
        String[] parts = text.split(",");
        int[] result = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            result[i] = Integer.parseInt(parts[i].trim());
        }
        return result;
    }

    private static List<Object> project(List<Object> row, int[] columns) {
        List<Object> values = new ArrayList<>(columns.length);
        for (int column : columns) {
            values.add(row.get(column));
        }
        return values;
    }

    private static Object matchKey(List<Object> row, int[] upsertKey) {
        return upsertKey.length > 0 ? project(row, upsertKey) : row;
    }

    private static void emit(PrintStream out, long index, String op, List<Object> row) {
        StringBuilder line = new StringBuilder("{\"in\": ").append(index).append(", \"op\": \"").append(op);
        line.append("\", \"row\": ");
        write(line, row);
        out.println(line.append('}'));
        out.flush();
    }

    private static void write(StringBuilder sb, Object value) {
        if (value instanceof String text) {
            sb.append('"');
            for (char c : text.toCharArray()) {
                switch (c) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\n' -> sb.append("\\n");
                    case '\r' -> sb.append("\\r");
                    case '\t' -> sb.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                    }
                }
            }
            sb.append('"');
        } else if (value instanceof List<?> list) {
            sb.append('[');
            for (int i = 0; i < list.size(); i++) {
                sb.append(i == 0 ? "" : ", ");
                write(sb, list.get(i));
            }
            sb.append(']');
        } else if (value instanceof Map<?, ?> map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : map.entrySet()) {
                sb.append(first ? "" : ", ");
                first = false;
                write(sb, entry.getKey());
                sb.append(": ");
                write(sb, entry.getValue());
            }
            sb.append('}');
        } else {
            sb.append(value); // BigInteger, Double (e.g. 1.0, 1.0E100), Boolean, NULL
        }
    }

    /** A small recursive-descent JSON parser that keeps integer and float types apart. */
    private static final class Json {
        private final String text;
        private int at;

        Json(String text) {
            this.text = text;
        }

        Object parse() {
            Object value = value();
            space();
            if (at != text.length()) {
                throw new IllegalArgumentException("trailing text at column " + at);
            }
            return value;
        }

        private void space() {
            while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
                at++;
            }
        }

        private Object value() {
            space();
            char c = text.charAt(at);
            if (c == '{') {
                Map<String, Object> map = new LinkedHashMap<>();
                at++;
                space();
                if (text.charAt(at) == '}') {
                    at++;
                    return map;
                }
                while (true) {
                    space();
                    String key = string();
                    space();
                    expect(':');
                    map.put(key, value());
                    space();
                    if (text.charAt(at++) == '}') {
                        return map;
                    }
                }
            }
            if (c == '[') {
                List<Object> list = new ArrayList<>();
                at++;
                space();
                if (text.charAt(at) == ']') {
                    at++;
                    return list;
                }
                while (true) {
                    list.add(value());
                    space();
                    if (text.charAt(at++) == ']') {
                        return list;
                    }
                }
            }
            if (c == '"') {
                return string();
            }
            if (text.startsWith("true", at)) {
                at += 4;
                return Boolean.TRUE;
            }
            if (text.startsWith("false", at)) {
                at += 5;
                return Boolean.FALSE;
            }
            if (text.startsWith("null", at)) {
                at += 4;
                return NULL;
            }
            int start = at;
            while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) {
                at++;
            }
            String number = text.substring(start, at);
            boolean isFloat = number.contains(".") || number.contains("e") || number.contains("E");
            return isFloat ? (Object) Double.valueOf(number) : new BigInteger(number);
        }

        private void expect(char c) {
            if (text.charAt(at++) != c) {
                throw new IllegalArgumentException("expected '" + c + "' at column " + (at - 1));
            }
        }

        private String string() {
            expect('"');
            StringBuilder sb = new StringBuilder();
            while (true) {
                char c = text.charAt(at++);
                if (c == '"') {
                    return sb.toString();
                }
                if (c != '\\') {
                    sb.append(c);
                    continue;
                }
                char e = text.charAt(at++);
                switch (e) {
                    case 'b' -> sb.append('\b');
                    case 'f' -> sb.append('\f');
                    case 'n' -> sb.append('\n');
                    case 'r' -> sb.append('\r');
                    case 't' -> sb.append('\t');
                    case 'u' -> {
                        sb.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                        at += 4;
                    }
                    default -> sb.append(e); // \" \\ \/
                }
            }
        }
    }
}
